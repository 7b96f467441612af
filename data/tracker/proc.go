package tracker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// owner identifies the process that runs a run: its PID, the host name, and
// a token "<boot id>/<start time in clock ticks>" from /proc (empty where
// /proc is missing) that tells a PID reused after the process died, or after
// a reboot, from the original process.
type owner struct {
	PID   int
	Host  string
	Token string
}

// self is the current process's owner.
func self() owner {
	host, _ := os.Hostname()
	pid := os.Getpid()
	tok, _ := procToken(pid)
	return owner{PID: pid, Host: host, Token: tok}
}

// procToken returns pid's "<boot id>/<start ticks>" and whether the process
// exists and is not a zombie. A missing /proc gives ("", true) when
// kill(pid, 0) finds the process.
func procToken(pid int) (string, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			// No procfs: signal 0 only tells whether the PID exists.
			err := syscall.Kill(pid, 0)
			return "", err == nil || errors.Is(err, syscall.EPERM)
		}
		return "", false
	}
	// Fields after the parenthesised command name (which may hold spaces):
	// state is field 3, starttime field 22 (proc(5)).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return "", false
	}
	if f[0] == "Z" || f[0] == "X" {
		return "", false // exited, not yet reaped: gone all the same
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return fmt.Sprintf("%s/%s", strings.TrimSpace(string(boot)), f[19]), true
}

// alive reports whether the run owner o is a live process, as far as this
// host can tell: known is false for another host's run (its PID means
// nothing here).
func alive(o owner, host string) (live, known bool) {
	if o.PID <= 0 || o.Host == "" || o.Host != host {
		return true, false
	}
	tok, ok := procToken(o.PID)
	if !ok {
		return false, true
	}
	if o.Token != "" && tok != "" && tok != o.Token {
		return false, true // the PID now belongs to another process
	}
	return true, true
}
