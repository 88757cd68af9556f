# The nine Custos service images in one command, from the repository root (docs/images.md).
# By default every target is built for linux/amd64 and linux/arm64 with an SBOM and provenance,
# which Docker's default builder (the "docker" driver) cannot do unless Docker uses the containerd
# image store: create a docker-container builder first (docker buildx create --driver
# docker-container --use). Without --push the images then stay inside that builder (its cache);
# nothing lands in `docker images`.
#
#   REGISTRY=registry.example.com/custos TAG=0.1.0 \
#     SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) REVISION=$(git rev-parse HEAD) \
#     docker buildx bake --push                          # the release: all nine, pushed
#   PLATFORMS=linux/amd64 docker buildx bake --load      # into the local image store, one platform
#   PLATFORMS=linux/amd64 docker buildx bake --load --sbom=false --provenance=false
#                                                        # the same with the default "docker" builder
#   docker buildx bake --print                           # the resolved build definition, no build
#   PLATFORMS=linux/amd64 docker buildx bake --load identity signer   # some targets only
#
# Every target builds tools/docker/service.Dockerfile with SERVICE=<name>; the image is
# ${REGISTRY}/custos-<name>:${TAG}, which is what charts/custos pulls by default
# (image.registry, and image.tag empty = the chart's appVersion). TAG's default is kept equal to
# charts/custos/Chart.yaml appVersion (the chart tests check it): bump both together.

variable "REGISTRY" {
  # The chart's default image.registry. There is no public registry of Custos images: set your own.
  default = "registry.example.com/custos"
}

variable "TAG" {
  # = charts/custos/Chart.yaml appVersion. A release tag, never a moving one such as latest.
  default = "0.1.0"
}

variable "REVISION" {
  # The git commit the images are built from (org.opencontainers.image.revision).
  default = ""
}

variable "SOURCE_URL" {
  # Where the source of that commit can be read (org.opencontainers.image.source).
  default = ""
}

variable "SOURCE_DATE_EPOCH" {
  # Seconds since the epoch, e.g. the commit's time: with it, image timestamps (config, history
  # and, through rewrite-timestamp, the files of every layer) no longer depend on when the build
  # ran. Empty: the build's own time.
  default = ""
}

variable "PLATFORMS" {
  # Comma-separated. Building the foreign one needs QEMU binfmt or a native builder node.
  default = "linux/amd64,linux/arm64"
}

group "default" {
  targets = [
    "gateway",
    "identity",
    "vault-crypto",
    "policy",
    "signer",
    "approvals",
    "audit",
    "webhook-dispatcher",
    "billing",
  ]
}

# What every service shares; each target only names its service.
target "_service" {
  context    = "."
  dockerfile = "tools/docker/service.Dockerfile"
  target     = "runtime"
  platforms  = split(",", PLATFORMS)
  args = {
    SOURCE_DATE_EPOCH = SOURCE_DATE_EPOCH
  }
  labels = {
    "org.opencontainers.image.source"   = SOURCE_URL
    "org.opencontainers.image.revision" = REVISION
    "org.opencontainers.image.version"  = TAG
    "org.opencontainers.image.licenses" = "Apache-2.0"
    "org.opencontainers.image.vendor"   = "Custos"
  }
  # An SBOM (SPDX, from the image's files) and max-mode SLSA provenance, attached to the pushed
  # image index. Read them with `docker buildx imagetools inspect <image> --format '{{ json .SBOM }}'`
  # (and `.Provenance`).
  attest = [
    "type=sbom",
    "type=provenance,mode=max",
  ]
  # `--push` adds push=true to this output; rewrite-timestamp clamps file times to SOURCE_DATE_EPOCH.
  output = ["type=image,rewrite-timestamp=true"]
}

target "gateway" {
  inherits = ["_service"]
  args     = { SERVICE = "gateway" }
  tags     = ["${REGISTRY}/custos-gateway:${TAG}"]
}

target "identity" {
  inherits = ["_service"]
  args     = { SERVICE = "identity" }
  tags     = ["${REGISTRY}/custos-identity:${TAG}"]
}

target "vault-crypto" {
  inherits = ["_service"]
  args     = { SERVICE = "vault-crypto" }
  tags     = ["${REGISTRY}/custos-vault-crypto:${TAG}"]
}

target "policy" {
  inherits = ["_service"]
  args     = { SERVICE = "policy" }
  tags     = ["${REGISTRY}/custos-policy:${TAG}"]
}

target "signer" {
  inherits = ["_service"]
  args     = { SERVICE = "signer" }
  tags     = ["${REGISTRY}/custos-signer:${TAG}"]
}

target "approvals" {
  inherits = ["_service"]
  args     = { SERVICE = "approvals" }
  tags     = ["${REGISTRY}/custos-approvals:${TAG}"]
}

target "audit" {
  inherits = ["_service"]
  args     = { SERVICE = "audit" }
  tags     = ["${REGISTRY}/custos-audit:${TAG}"]
}

target "webhook-dispatcher" {
  inherits = ["_service"]
  args     = { SERVICE = "webhook-dispatcher" }
  tags     = ["${REGISTRY}/custos-webhook-dispatcher:${TAG}"]
}

target "billing" {
  inherits = ["_service"]
  args     = { SERVICE = "billing" }
  tags     = ["${REGISTRY}/custos-billing:${TAG}"]
}
