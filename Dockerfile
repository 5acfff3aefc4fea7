# olmguard's image: the webhook, the controller and the kubectl plugin, static, on an empty base,
# running as an unprivileged user. `make image IMG=...` builds it with Docker; `make image-archive`
# builds the same image without Docker (internal/image; a test keeps the two in agreement).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/webhook ./cmd/controller ./cmd/kubectl-olmguard

# Nothing but the binaries: they need no shell, no libc and no CA bundle (the kube-apiserver's CA
# comes with the ServiceAccount token); the manifests mount an emptyDir at /tmp.
FROM scratch
LABEL org.opencontainers.image.title="olmguard" org.opencontainers.image.source="https://github.com/olmguard/olmguard"
COPY --from=build /out/webhook /out/controller /out/kubectl-olmguard /
USER 65532:65532
ENTRYPOINT ["/controller"]
