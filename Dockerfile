# olmguard's image: the webhook, the controller and the kubectl plugin, static, on a distroless
# base, running as an unprivileged user. `make image IMG=...` builds it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/webhook ./cmd/controller ./cmd/kubectl-olmguard

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/webhook /out/controller /out/kubectl-olmguard /
USER 65532:65532
ENTRYPOINT ["/controller"]
