package testserver

import "syscall"

// sysProcAttr makes the server get SIGTERM if the test process dies (a timeout's panic, a
// kill), so that no server or redis-server outlives a test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
