package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrKeyNotFound is returned by EtcdGet for an absent key.
var ErrKeyNotFound = errors.New("etcd key not found")

// Etcd returns a client of the control plane's etcd, bypassing the apiserver; Stop closes it.
func (cp *ControlPlane) Etcd() (*clientv3.Client, error) {
	cp.etcdMu.Lock()
	defer cp.etcdMu.Unlock()
	if cp.etcd != nil {
		return cp.etcd, nil
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{cp.EtcdEndpoint},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	cp.etcd = c
	return c, nil
}

func (cp *ControlPlane) closeEtcd() error {
	cp.etcdMu.Lock()
	defer cp.etcdMu.Unlock()
	if cp.etcd == nil {
		return nil
	}
	err := cp.etcd.Close()
	cp.etcd = nil
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// EtcdGet returns the raw bytes etcd stores under key: built-in resources are protobuf
// ("k8s\x00" prefix), custom resources JSON. Keys look like /registry/configmaps/<ns>/<name>
// or /registry/<group>/<plural>/<ns>/<name>.
func (cp *ControlPlane) EtcdGet(ctx context.Context, key string) ([]byte, error) {
	c, err := cp.Etcd()
	if err != nil {
		return nil, err
	}
	resp, err := c.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("etcd get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("etcd get %s: %w", key, ErrKeyNotFound)
	}
	return resp.Kvs[0].Value, nil
}

// EtcdPut writes value under key directly, as an earlier release or another writer without
// this release's admission could have stored it; the apiserver's watch caches see it as any
// other change.
func (cp *ControlPlane) EtcdPut(ctx context.Context, key string, value []byte) error {
	c, err := cp.Etcd()
	if err != nil {
		return err
	}
	if _, err := c.Put(ctx, key, string(value)); err != nil {
		return fmt.Errorf("etcd put %s: %w", key, err)
	}
	return nil
}

// StoredObject is one value etcd holds, as the apiserver wrote it.
type StoredObject struct {
	// Key is the etcd key without the prefix asked for, e.g. "<ns>/<name>".
	Key         string
	Value       []byte
	ModRevision int64
}

// APIVersion is the apiVersion a custom resource is encoded at ("" for anything that is not
// JSON, such as a built-in resource's protobuf).
func (o StoredObject) APIVersion() string {
	var head struct {
		APIVersion string `json:"apiVersion"`
	}
	if json.Unmarshal(o.Value, &head) != nil {
		return ""
	}
	return head.APIVersion
}

// StoredObjects reads every value under prefix straight from etcd, with the revision the read
// saw.
func (cp *ControlPlane) StoredObjects(ctx context.Context, prefix string) ([]StoredObject, int64, error) {
	c, err := cp.Etcd()
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("etcd list %s: %w", prefix, err)
	}
	objs := make([]StoredObject, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		objs[i] = StoredObject{Key: strings.TrimPrefix(string(kv.Key), prefix), Value: kv.Value, ModRevision: kv.ModRevision}
	}
	return objs, resp.Header.Revision, nil
}

// EtcdDelete removes key directly: a test's last resort to take away an object it stored
// that the API cannot delete.
func (cp *ControlPlane) EtcdDelete(ctx context.Context, key string) error {
	c, err := cp.Etcd()
	if err != nil {
		return err
	}
	if _, err := c.Delete(ctx, key); err != nil {
		return fmt.Errorf("etcd delete %s: %w", key, err)
	}
	return nil
}

// EtcdCompact compacts etcd at its current revision, which expires every continue token the
// apiserver issued so far, and returns that revision.
func (cp *ControlPlane) EtcdCompact(ctx context.Context) (int64, error) {
	rev, err := cp.EtcdRevision(ctx)
	if err != nil {
		return 0, err
	}
	c, err := cp.Etcd()
	if err != nil {
		return 0, err
	}
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("etcd compact at %d: %w", rev, err)
	}
	return rev, nil
}

// EtcdHistory returns every value etcd stored under key at a revision after since, oldest first
// (a deletion ends the history it reads back from).
func (cp *ControlPlane) EtcdHistory(ctx context.Context, key string, since int64) ([]StoredObject, error) {
	c, err := cp.Etcd()
	if err != nil {
		return nil, err
	}
	var out []StoredObject
	for rev := int64(0); ; {
		opts := []clientv3.OpOption{}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.Get(ctx, key, opts...)
		if err != nil {
			return nil, fmt.Errorf("etcd get %s at revision %d: %w", key, rev, err)
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision <= since {
			break
		}
		kv := resp.Kvs[0]
		out = append([]StoredObject{{Key: key, Value: kv.Value, ModRevision: kv.ModRevision}}, out...)
		rev = kv.ModRevision - 1
	}
	return out, nil
}

// EtcdRevision is etcd's current revision.
func (cp *ControlPlane) EtcdRevision(ctx context.Context) (int64, error) {
	c, err := cp.Etcd()
	if err != nil {
		return 0, err
	}
	resp, err := c.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}
