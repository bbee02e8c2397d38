package proc

import "syscall"

// dieWithParent has Linux kill the server when mtpconv itself is killed
// (SIGKILL leaves no chance to stop it): no orphaned server holds the port or the memory.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
