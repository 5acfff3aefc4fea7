package release

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry/remote"
)

// TestChartArtifactHelmPull: the chart's OCI artifact, copied as it is into a registry by oras, is what
// Helm's own registry client pulls for `helm install oci://...`: the chart's metadata and the
// packaged chart byte for byte.
func TestChartArtifactHelmPull(t *testing.T) {
	tgz, out := chartArtifact(t)
	// oras reads the layout's tar as it is, as `oras cp --from-oci-layout` does.
	src, err := oci.NewFromTar(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dst, err := remote.NewRepository(host + "/olmguard/charts/olmguard")
	if err != nil {
		t.Fatal(err)
	}
	dst.PlainHTTP = true
	if _, err := oras.Copy(context.Background(), src, "0.2.0", dst, "0.2.0", oras.DefaultCopyOptions); err != nil {
		t.Fatal(err)
	}

	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.Pull(host + "/olmguard/charts/olmguard:0.2.0")
	if err != nil {
		t.Fatalf("helm's registry client cannot pull the artifact: %v", err)
	}
	want, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if got.Chart == nil || string(got.Chart.Data) != string(want) || got.Chart.Meta == nil ||
		got.Chart.Meta.Name != "olmguard" || got.Chart.Meta.Version != "0.2.0" || got.Chart.Meta.AppVersion != "v0.2.0" {
		t.Errorf("helm pulled %+v", got.Chart)
	}
}
