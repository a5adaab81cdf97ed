package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/task-operator/internal/version"
)

// OperatorSelector finds the operator's Deployment wherever it was installed: the selector
// labels config/default and the Helm chart both give it.
const OperatorSelector = "app.kubernetes.io/name=task-operator,control-plane=controller-manager"

func newVersionCommand(o *Options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, the cluster's, and the operator's when it runs in the cluster",
		Long: `Print the plugin's version (the release it was built as, and its commit), the Kubernetes
version of the cluster, and the operator's version.

The operator's version is the image of the manager container of every Deployment labelled
` + OperatorSelector + ` (as config/default and the Helm chart install it),
with the app.kubernetes.io/version label when the chart set it. An operator run outside the
cluster (make run, a local process) has no such Deployment and is reported as not found.`,
		Example: `  kubectl task version
  kubectl task version --client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(o.Streams.Out, "Client: %s\n", clientVersion())
			if clientOnly {
				return nil
			}
			return serverVersions(cmd.Context(), o, o.Streams.Out)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print the plugin's version only; contact no cluster")
	return cmd
}

func clientVersion() string {
	return strings.Replace(version.Get().String(), "task-operator", "kubectl-task", 1)
}

// serverVersions reads only built-in APIs: it works on a cluster without the CRD, where it is
// most useful (debugging an install).
func serverVersions(ctx context.Context, o *Options, out io.Writer) error {
	c, err := o.connectKube()
	if err != nil {
		return err
	}
	sv, err := c.kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("kubernetes version: %w", err)
	}
	fmt.Fprintf(out, "Kubernetes: %s\n", sv.GitVersion)
	list, err := c.kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: OperatorSelector})
	if err != nil {
		fmt.Fprintf(out, "Operator: unknown (listing Deployments: %v)\n", err)
		return nil
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(out, "Operator: not found in the cluster (no Deployment labelled %s)\n", OperatorSelector)
		return nil
	}
	for _, d := range list.Items {
		fmt.Fprintf(out, "Operator: %s\n", operatorVersion(d))
	}
	return nil
}

func operatorVersion(d appsv1.Deployment) string {
	image := "<no manager container>"
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" || len(d.Spec.Template.Spec.Containers) == 1 {
			image = c.Image
		}
	}
	s := fmt.Sprintf("%s (deployment %s/%s, %d/%d ready)", image, d.Namespace, d.Name, d.Status.ReadyReplicas, d.Status.Replicas)
	if v := d.Labels["app.kubernetes.io/version"]; v != "" {
		s = v + ", " + s
	}
	return s
}
