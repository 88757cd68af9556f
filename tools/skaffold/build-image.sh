#!/bin/sh
# skaffold's builder of one service image (skaffold.yaml, `custom` artifacts): run from the
# repository root as `sh tools/skaffold/build-image.sh <service>`. skaffold sets IMAGE (the
# reference to build), PUSH_IMAGE (true for a remote cluster) and PLATFORMS (when asked for).
# The image is the same as `docker buildx bake <service>` builds (tools/docker/service.Dockerfile
# through services/<service>/Dockerfile), without the release's SBOM and provenance.
set -eu
SERVICE="${1:?usage: build-image.sh <service>}"
: "${IMAGE:?skaffold sets IMAGE}"
DOCKERFILE="services/${SERVICE}/Dockerfile"
[ -f "$DOCKERFILE" ] || { echo "no $DOCKERFILE" >&2; exit 2; }
# The output is always named: with a docker-container builder (docs/images.md has the operator
# create one for bake), a build without --load or --push stays in the builder's cache, and
# skaffold (or kind load) would not find $IMAGE.
if [ "${PUSH_IMAGE:-false}" = true ]; then
  OUTPUT=--push
else
  # A local cluster (kind, minikube, Docker Desktop): skaffold loads the image from the local
  # image store. --load takes one platform unless Docker uses the containerd image store.
  OUTPUT=--load
fi
# shellcheck disable=SC2086 # PLATFORMS is one comma-separated word or empty
exec docker buildx build --file "$DOCKERFILE" --tag "$IMAGE" ${PLATFORMS:+--platform "$PLATFORMS"} \
  --provenance=false --sbom=false "$OUTPUT" .
