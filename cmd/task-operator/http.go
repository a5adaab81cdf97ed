package main

import (
	"os"

	httprunner "example.com/task-operator/runner/http"
)

func runHTTP(args []string) int {
	return httprunner.Main(args, os.Stdout, os.Stderr)
}
