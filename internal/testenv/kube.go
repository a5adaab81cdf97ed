package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/apis/install"
)

// NewScheme knows the built-in kinds, CustomResourceDefinitions and Task at every version.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apix.AddToScheme, install.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("scheme: %w", err)
		}
	}
	return scheme, nil
}

// CreateNamespace creates the namespace unless it exists.
func CreateNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// Kubectl runs kubectl with stdin on the cluster of kubeconfig ("" for none: kustomize needs
// no cluster) and returns what it printed; the error quotes stderr.
func Kubectl(ctx context.Context, kubeconfig string, stdin []byte, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = os.Environ()
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), nil
}

// NewClient is a controller-runtime client for cfg knowing every version of Task.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}
