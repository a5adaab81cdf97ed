package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
)

// ports prints n distinct TCP ports free on 127.0.0.1, one a line, for `make run` to give the
// operator: the kernel picks each by a listen on port 0, and all stay held until every one is
// chosen, so none is printed twice. Another process may still take one before the operator
// binds it; the operator then fails to start and says which address is in use.
func ports(w io.Writer, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: cluster ports N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > 16 {
		return fmt.Errorf("ports: N must be a number from 1 to 16, not %q", args[0])
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("find a free port: %w", err)
		}
		held = append(held, l)
		fmt.Fprintln(w, l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}
