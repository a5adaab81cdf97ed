// Package version says which build of the operator is running: the release set at link time
// (-ldflags "-X example.com/task-operator/internal/version.version=v1.2.3", as `make build`
// and the image build do), else the module version Go recorded (go install ...@v1.2.3), and
// the commit the binary was built from.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and revision are set at link time (make build, make image); empty in a plain
// `go build`, which records the revision in the build information instead (when it can see
// the repository).
var version, revision string

// Info describes the running binary.
type Info struct {
	Version   string // v1.2.3, or "(devel)" for an untagged build
	Revision  string // the VCS commit, "+dirty" appended for a modified tree; empty if unknown
	BuildTime string // the commit time, RFC 3339; empty if unknown
	GoVersion string
}

// Get reads the build information of the running binary.
func Get() Info {
	info := fromBuildInfo(version, readBuildInfo())
	if info.Revision == "" {
		info.Revision = revision
	}
	return info
}

func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

func fromBuildInfo(linked string, bi *debug.BuildInfo) Info {
	info := Info{Version: linked, GoVersion: runtime.Version()}
	if bi == nil {
		if info.Version == "" {
			info.Version = "(unknown)"
		}
		return info
	}
	info.GoVersion = bi.GoVersion
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.BuildTime = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && info.Revision != "" {
		info.Revision += "+dirty"
	}
	return info
}

// String is the one line `task-operator --version` prints.
func (i Info) String() string {
	s := "task-operator " + i.Version
	if i.Revision != "" {
		s += " (" + i.Revision
		if i.BuildTime != "" {
			s += ", " + i.BuildTime
		}
		s += ")"
	}
	return fmt.Sprintf("%s %s", s, i.GoVersion)
}
