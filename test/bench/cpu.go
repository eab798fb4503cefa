package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The processes whose CPU time the bench accounts for.
var cpuRoles = []string{"kube-apiserver", "etcd", "manager", "bench"}

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux the bench runs on).
const clockTick = 10 * time.Millisecond

// cpuTimes is the CPU time each process of the run has used so far: the
// local control plane's kube-apiserver and etcd (children of the bench),
// the manager and the bench itself (load, watches).
func (b *bench) cpuTimes() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	self := os.Getpid()
	pids, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	for _, dir := range pids {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		comm, ppid, used, err := procStat(pid)
		if err != nil {
			continue // gone since the listing
		}
		switch {
		case pid == self:
			out["bench"] = used
		case b.manager != nil && pid == b.manager.Process.Pid:
			out["manager"] = used
		case ppid == self && (comm == "kube-apiserver" || comm == "etcd"):
			out[comm] = used
		}
	}
	if out["kube-apiserver"] == 0 || out["etcd"] == 0 {
		return nil, fmt.Errorf("kube-apiserver and etcd not found among the bench's children")
	}
	return out, nil
}

// procStat reads a process's name, parent and CPU time (user and system).
func procStat(pid int) (comm string, ppid int, used time.Duration, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, err
	}
	// pid (comm) state ppid ...: comm may hold spaces, the fields after
	// its closing parenthesis do not.
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return "", 0, 0, err
	}
	utime, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return "", 0, 0, err
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return "", 0, 0, err
	}
	return s[open+1 : end], ppid, time.Duration(utime+stime) * clockTick, nil
}

// cpuPerAsk records the CPU time each process spent per ask since before,
// and in all, as figures named after what.
func (b *bench) cpuPerAsk(before map[string]time.Duration, what string) error {
	after, err := b.cpuTimes()
	if err != nil {
		return err
	}
	total := time.Duration(0)
	for _, role := range cpuRoles {
		if _, ok := after[role]; !ok {
			continue // no manager during the baseline
		}
		used := after[role] - before[role]
		total += used
		b.r.set(fmt.Sprintf("%s: CPU ms per ask, %s", what, role), ms(used)/float64(b.s.Asks))
	}
	b.r.set(fmt.Sprintf("%s: CPU ms per ask, all", what), ms(total)/float64(b.s.Asks))
	return nil
}
