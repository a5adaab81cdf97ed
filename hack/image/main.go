// Command image builds the operator's container image from a static binary, without a Docker
// engine (see internal/image), and writes it as an OCI layout, a `docker load` tarball, or
// pushes it to a registry. `make image` and `make image-push` run it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"example.com/task-operator/internal/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var o image.Options
	var tag, layoutDir, tarPath string
	var push bool
	flag.StringVar(&o.Binary, "binary", "", "static task-operator binary for --os/--arch (required)")
	flag.StringVar(&o.OS, "os", "linux", "image OS")
	flag.StringVar(&o.Arch, "arch", "amd64", "image architecture")
	flag.StringVar(&o.Version, "version", "", "version label")
	flag.StringVar(&o.Revision, "revision", "", "revision label (commit)")
	flag.StringVar(&o.Source, "source", "", "source label (repository URL)")
	flag.StringVar(&tag, "tag", "example.com/task-operator:latest", "image reference")
	flag.StringVar(&layoutDir, "layout", "", "write an OCI image layout here")
	flag.StringVar(&tarPath, "tarball", "", "write a docker-load tarball here")
	flag.BoolVar(&push, "push", false, "push to --tag's registry (docker credentials)")
	flag.Parse()
	if o.Binary == "" {
		return fmt.Errorf("--binary is required")
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	o.Created = created
	img, err := image.Build(o)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	size, err := image.CompressedSize(img)
	if err != nil {
		return err
	}
	fmt.Printf("built %s (%s/%s) %s, %.1f MiB compressed\n", tag, o.OS, o.Arch, digest, float64(size)/(1<<20))
	if layoutDir != "" {
		if err := image.WriteLayout(img, layoutDir, tag); err != nil {
			return err
		}
		fmt.Println("OCI layout:", layoutDir)
	}
	if tarPath != "" {
		if err := image.WriteTarball(img, tarPath, tag); err != nil {
			return err
		}
		fmt.Println("docker load -i", tarPath)
	}
	if push {
		d, err := image.Push(context.Background(), img, tag)
		if err != nil {
			return err
		}
		fmt.Println("pushed", d)
	}
	return nil
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH (the reproducible-builds convention; the Makefile sets
// the commit time), else the Unix epoch: a fixed time keeps the digest reproducible.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}
