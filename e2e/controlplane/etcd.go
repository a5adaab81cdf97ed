package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrKeyNotFound is returned by EtcdGet for an absent key.
var ErrKeyNotFound = errors.New("etcd key not found")

// EtcdGet returns the raw bytes etcd stores under key, bypassing the
// apiserver: built-in resources are protobuf ("k8s\x00" prefix), custom
// resources JSON. Keys look like /registry/configmaps/<ns>/<name> or
// /registry/<group>/<plural>/<ns>/<name>.
func (cp *ControlPlane) EtcdGet(ctx context.Context, key string) ([]byte, error) {
	var value []byte
	err := cp.withEtcd(func(c *clientv3.Client) error {
		resp, err := c.Get(ctx, key)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return ErrKeyNotFound
		}
		value = resp.Kvs[0].Value
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("etcd get %s: %w", key, err)
	}
	return value, nil
}

// EtcdKeys lists the keys under prefix, e.g. "/registry/example.com/".
func (cp *ControlPlane) EtcdKeys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := cp.withEtcd(func(c *clientv3.Client) error {
		resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("etcd list %s: %w", prefix, err)
	}
	return keys, nil
}

// withEtcd runs fn with a short-lived client: reads are rare in tests and a
// cached client would have to be closed by Stop.
func (cp *ControlPlane) withEtcd(fn func(*clientv3.Client) error) error {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{cp.EtcdEndpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = c.Close() }()
	return fn(c)
}
