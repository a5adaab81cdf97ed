// Package install_test installs the operator as users do — the README's commands, config/default
// as rendered with only the image substituted through images: — and runs real operator
// processes for the Deployment's pods (testenv's stand-ins): each in a network namespace holding
// the pod IP KWOK assigned, authenticated with a token of the pod's ServiceAccount, called by the
// apiserver through the webhook Service's EndpointSlices. So the shipped RBAC, the certificate's
// names, CA injection and the Service wiring are what is exercised; a missing verb fails here.
package install_test

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"example.com/task-operator/internal/image"
	"example.com/task-operator/internal/kubelet"
	"example.com/task-operator/internal/testenv"
)

const operatorNamespace = "task-operator-system"

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	if err := kubelet.CleanStalePodNetworks(); err != nil {
		fmt.Fprintln(os.Stderr, "clean stale pod networks:", err)
	}
	testenv.Main(m, testenv.Options{
		Full:              true,
		CRDPaths:          []string{}, // the install brings the CRD
		StandInNamespaces: []string{operatorNamespace},
	})
}

// operatorBinary is what stands in for the image's entrypoint: the binary inside the image
// `make image` built (make test passes its layout), else the operator built here.
func operatorBinary(t *testing.T) string {
	t.Helper()
	layout := os.Getenv("IMAGE_LAYOUT")
	if layout == "" {
		bin, err := testenv.OperatorBinary()
		if err != nil {
			t.Fatal(err)
		}
		return bin
	}
	img, _, err := image.ReadLayout(layout)
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no /task-operator in the image %s: %v", layout, err)
		}
		if h.Name != "task-operator" && h.Name != "/task-operator" {
			continue
		}
		path := filepath.Join(t.TempDir(), "task-operator")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
}
