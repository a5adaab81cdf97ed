package image_test

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"example.com/task-operator/internal/image"
)

// LayoutEnv names an OCI layout built by `make image` (make test sets it, so CI inspects the
// very image it built). Without it the test builds one the same way, with make build's flags so
// that its compiled packages are reused.
const LayoutEnv = "IMAGE_LAYOUT"

func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator")
	}
	img, ref := imageUnderTest(t)
	size, err := image.CompressedSize(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s: %.1f MiB compressed", ref, float64(size)/(1<<20))

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("image user = %q, want 65532:65532 (nonroot, as the Deployment's runAsUser)", cfg.Config.User)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/task-operator"}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/task-operator] and no cmd (the Deployment passes args)", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if cfg.OS != "linux" {
		t.Errorf("image OS = %q, want linux", cfg.OS)
	}

	fs := flatten(t, img)
	checkStaticBinary(t, fs["task-operator"])
	checkCAs(t, fs["etc/ssl/certs/ca-certificates.crt"])
	if !strings.Contains(string(fs["etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", fs["etc/passwd"].data)
	}
	if tmp, ok := fs["tmp"]; !ok || tmp.mode&0o1777 != 0o1777 {
		t.Errorf("/tmp missing or not world-writable with the sticky bit: %+v", tmp)
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
		if _, ok := fs[shell]; ok {
			t.Errorf("image contains %s; it should hold the operator alone", shell)
		}
	}
	runBinary(t, fs["task-operator"], cfg)
	pushAndPull(t, img)
}

func imageUnderTest(t *testing.T) (v1.Image, string) {
	t.Helper()
	if dir := os.Getenv(LayoutEnv); dir != "" {
		img, ref, err := image.ReadLayout(dir)
		if err != nil {
			t.Fatalf("%s=%s: %v", LayoutEnv, dir, err)
		}
		return img, ref
	}
	bin := filepath.Join(t.TempDir(), "task-operator")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "example.com/task-operator/cmd/task-operator")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	img, err := image.Build(image.Options{Binary: bin, Arch: runtime.GOARCH, Created: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	// Through a layout and back, as make image writes it.
	dir := filepath.Join(t.TempDir(), "oci")
	const ref = "example.com/task-operator:test"
	if err := image.WriteLayout(img, dir, ref); err != nil {
		t.Fatal(err)
	}
	img, got, err := image.ReadLayout(dir)
	if err != nil || got != ref {
		t.Fatalf("read layout back: %v, ref %q", err, got)
	}
	return img, ref
}

type entry struct {
	mode int64
	uid  int
	data []byte
}

// flatten reads the image's filesystem as a container runtime would lay it out.
func flatten(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	fs := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fs
		}
		if err != nil {
			t.Fatalf("read image filesystem: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fs[strings.Trim(h.Name, "/")] = entry{mode: h.Mode, uid: h.Uid, data: data}
	}
}

// checkStaticBinary: the image has no libc, so the binary must need no dynamic loader.
func checkStaticBinary(t *testing.T, bin entry) {
	t.Helper()
	if len(bin.data) == 0 || bin.mode&0o111 == 0 {
		t.Fatalf("/task-operator missing or not executable (mode %o)", bin.mode)
	}
	f, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("/task-operator is not an ELF binary: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/task-operator has an ELF interpreter: it is dynamically linked and cannot run on an image without libc")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("/task-operator needs shared libraries %v", libs)
	}
}

// checkCAs: HTTP Tasks call https URLs from this image; Go reads this file for its roots.
func checkCAs(t *testing.T, cas entry) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cas.data) {
		t.Fatal("no CA certificates in /etc/ssl/certs/ca-certificates.crt")
	}
	if n := bytes.Count(cas.data, []byte("BEGIN CERTIFICATE")); n < 100 {
		t.Errorf("/etc/ssl/certs/ca-certificates.crt holds %d certificates, want a full root store", n)
	}
}

// runBinary runs the image's own binary, where the host can, with the image's user.
func runBinary(t *testing.T, bin entry, cfg *v1.ConfigFile) {
	t.Helper()
	if runtime.GOOS != cfg.OS || runtime.GOARCH != cfg.Architecture {
		t.Logf("not running the %s/%s binary on %s/%s", cfg.OS, cfg.Architecture, runtime.GOOS, runtime.GOARCH)
		return
	}
	path := filepath.Join(t.TempDir(), "task-operator")
	if err := os.WriteFile(path, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "task-operator ") {
		t.Errorf("/task-operator --version: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// pushAndPull sends the image to a registry on loopback, as make image-push does, and pulls it
// back: the same digest comes back.
func pushAndPull(t *testing.T, img v1.Image) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/task-operator:test"
	pushed, err := image.Push(t.Context(), img, ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(pushed)
	if err != nil {
		t.Fatalf("pull %s: %v", pushed, err)
	}
	want, _ := img.Digest()
	got, err := pulled.Digest()
	if err != nil || got != want {
		t.Errorf("pulled digest %v (%v), want %v", got, err, want)
	}
}
