package record

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pidfdInfo is the kernel's struct pidfd_info in its first version
// (Linux 6.15), the size the ioctl's number was defined with there.
type pidfdInfo struct {
	mask, cgroupID                                                    uint64
	pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid uint32
	exitCode                                                          int32
}

const (
	pidfdInfoExit = 1 << 3 // PIDFD_INFO_EXIT
	// pidfdGetInfo is PIDFD_GET_INFO, _IOWR(0xFF, 11, struct pidfd_info).
	pidfdGetInfo = 3<<30 | uint(unsafe.Sizeof(pidfdInfo{}))<<16 | 0xFF<<8 | 11
)

// pidfdExit returns the wait status of the dead process of pidfd, which
// the kernel keeps for the pidfd even after another process reaped it:
// how the recorder learns how a descendant ended when its parent waited
// for it first (a shell's "wait", a killed grandchild), too soon for
// zombieStatus. Kernels before 6.15 do not keep it: false.
func pidfdExit(pidfd int) (syscall.WaitStatus, bool) {
	if pidfd < 0 {
		return 0, false
	}
	info := pidfdInfo{mask: pidfdInfoExit}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(pidfd), uintptr(pidfdGetInfo), uintptr(unsafe.Pointer(&info)))
	if errno != 0 || info.mask&pidfdInfoExit == 0 {
		return 0, false
	}
	return syscall.WaitStatus(info.exitCode), true
}
