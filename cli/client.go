package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/readguard"
)

// clients are what a command that talks to the cluster needs: Tasks through the dynamic
// client at the resource discovery found for example.com/v1, the core and batch APIs typed.
type clients struct {
	namespace string
	tasks     dynamic.NamespaceableResourceInterface
	kube      kubernetes.Interface
	config    *rest.Config
	mapper    meta.RESTMapper
}

// connect builds the clients from the kubeconfig flags. The apiserver's warnings (a
// deprecated version, a field it dropped) go to stderr, once each, as kubectl prints them.
// A cluster that does not serve Tasks at v1 is an error saying so.
func (o *Options) connect() (*clients, error) {
	c, err := o.connectKube()
	if err != nil {
		return nil, err
	}
	mapping, err := c.mapper.RESTMapping(taskv1.GroupKind, taskv1.GroupVersion.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, errTasksNotServed
		}
		return nil, fmt.Errorf("discovery of %s: %w", taskv1.GroupVersion, err)
	}
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		return nil, err
	}
	c.tasks = dyn.Resource(mapping.Resource)
	return c, nil
}

// errTasksNotServed is what every Task command says on a cluster without the CRD.
var errTasksNotServed = fmt.Errorf("the cluster does not serve %s %s: is the task-operator's CRD installed?", taskv1.Kind, taskv1.GroupVersion)

// connectKube builds the clients of the built-in APIs only (tasks stays nil): what a command
// that must work on a cluster without the CRD (version) needs.
func (o *Options) connectKube() (*clients, error) {
	cfg, err := o.Config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NewWarningWriter(o.Streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
	readguard.Wrap(cfg) // a Task no typed decoding can read shows as its annotation says, not as a hang
	ns, _, err := o.Config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	mapper, err := o.Config.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{namespace: ns, kube: kube, config: cfg, mapper: mapper}, nil
}

// tasksGone says whether a NotFound on a Task means Tasks are not served any more: discovery
// read from a cache (kubectl keeps it for hours) may still list a CRD deleted since. Discovery
// is read again, once, from the apiserver.
func (c *clients) tasksGone() bool {
	if c.mapper == nil {
		return false
	}
	meta.MaybeResetRESTMapper(c.mapper)
	_, err := c.mapper.RESTMapping(taskv1.GroupKind, taskv1.GroupVersion.Version)
	return meta.IsNoMatchError(err)
}

// getTask reads a Task at v1; a missing one is an error naming it and its namespace.
func (c *clients) getTask(ctx context.Context, name string) (*taskv1.Task, error) {
	u, err := c.tasks.Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, c.taskError(name, err)
	}
	task := &taskv1.Task{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, task); err != nil {
		return nil, fmt.Errorf("task %q in namespace %q: %w", name, c.namespace, err)
	}
	return task, nil
}

// taskError says what went wrong with a Task in words that name it.
func (c *clients) taskError(name string, err error) error {
	switch {
	case apierrors.IsNotFound(err) && c.tasksGone():
		return errTasksNotServed
	case apierrors.IsNotFound(err):
		return fmt.Errorf("task %q not found in namespace %q", name, c.namespace)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("task %q in namespace %q: forbidden: %s", name, c.namespace, apierrors.ReasonForError(err))
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Errorf("task %q in namespace %q: %s", name, c.namespace, status.Status().Message)
	}
	return fmt.Errorf("task %q in namespace %q: %w", name, c.namespace, err)
}

// jobsOf lists the Jobs the Task owns, oldest run first. They are selected by the
// task.example.com/name label and kept only when the Task is their controller: the label of a
// name longer than 63 characters is a cut plus a hash, so the owner, not the label, decides.
func (c *clients) jobsOf(ctx context.Context, task *taskv1.Task) ([]batchv1.Job, error) {
	jobs, _, err := c.listJobs(ctx, task)
	return jobs, err
}

// listJobs is jobsOf and the list's resourceVersion, where a watch of the same Jobs starts.
func (c *clients) listJobs(ctx context.Context, task *taskv1.Task) ([]batchv1.Job, string, error) {
	list, err := c.kube.BatchV1().Jobs(task.Namespace).List(ctx, metav1.ListOptions{LabelSelector: jobSelector(task)})
	if err != nil {
		return nil, "", fmt.Errorf("jobs of task %q: %w", task.Name, err)
	}
	jobs := slices.DeleteFunc(list.Items, func(j batchv1.Job) bool { return !controlledBy(j.OwnerReferences, task.UID) })
	slices.SortFunc(jobs, func(a, b batchv1.Job) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return jobs, list.ResourceVersion, nil
}

// jobSelector selects a Task's Jobs by the task.example.com/name label: every Job labelled
// when the name is too long to be the label's value (the owner decides then).
func jobSelector(task *taskv1.Task) string {
	if len(task.Name) <= 63 {
		return taskv1.LabelTaskName + "=" + task.Name
	}
	return taskv1.LabelTaskName
}

func controlledBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

// podsOf lists a Job's pods, oldest first, by the label the Job controller puts on them.
func (c *clients) podsOf(ctx context.Context, namespace, job string) ([]corev1.Pod, error) {
	list, err := c.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, fmt.Errorf("pods of job %q: %w", job, err)
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return pods, nil
}
