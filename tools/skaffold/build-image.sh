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
if [ "${PUSH_IMAGE:-false}" = true ]; then
  # shellcheck disable=SC2086 # PLATFORMS is one comma-separated word or empty
  docker buildx build --file "$DOCKERFILE" --tag "$IMAGE" ${PLATFORMS:+--platform "$PLATFORMS"} --push .
else
  # A local cluster (kind, minikube, Docker Desktop): skaffold loads the image from the local daemon.
  DOCKER_BUILDKIT=1 docker build --file "$DOCKERFILE" --tag "$IMAGE" .
fi
