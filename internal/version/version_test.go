package version

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"},
		{Key: "vcs.time", Value: "2026-11-30T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tests := []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		want   Info
	}{
		{"linked version wins", "v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-x"}, Settings: vcs},
			Info{Version: "v1.2.3", Revision: "abc123+dirty", BuildTime: "2026-11-30T10:00:00Z", GoVersion: "go1.26.8"}},
		{"module version from go install", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.0.0"}},
			Info{Version: "v1.0.0", GoVersion: "go1.26.8"}},
		{"plain go build", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs[:2]},
			Info{Version: "(devel)", Revision: "abc123", BuildTime: "2026-11-30T10:00:00Z", GoVersion: "go1.26.8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(tt.linked, tt.bi); got != tt.want {
				t.Errorf("fromBuildInfo = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestLinkedVersion builds the real binary with the -X flag `make build` passes and asks it.
// (Without -trimpath, unlike make build, so the compiled packages of other tests' builds are
// reused: only the link step differs.)
func TestLinkedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator")
	}
	bin := filepath.Join(t.TempDir(), "task-operator")
	build := exec.Command("go", "build",
		"-ldflags", "-X example.com/task-operator/internal/version.version=v9.8.7",
		"-o", bin, "example.com/task-operator/cmd/task-operator")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("task-operator %v: %v\n%s", args, err, out)
		}
		if !strings.HasPrefix(string(out), "task-operator v9.8.7") {
			t.Errorf("task-operator %v printed %q, want it to start with task-operator v9.8.7", args, out)
		}
	}
}
