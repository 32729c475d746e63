//go:build !linux

package testserver

import "syscall"

// sysProcAttr: elsewhere than Linux there is no parent-death signal; Stop is all there is.
func sysProcAttr() *syscall.SysProcAttr { return nil }
