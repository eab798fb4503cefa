// CPU time: what each process of the run (kube-apiserver, etcd, the
// manager, the bench) used, per ask and on the machine.

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
	busy, err := machineBusy()
	if err != nil {
		return nil, err
	}
	out[machine] = busy
	out[wall] = time.Duration(time.Now().UnixNano())
	return out, nil
}

// The pseudo-roles of cpuTimes: the CPU time every process of the machine
// has used, and the time of the reading.
const (
	machine = "machine"
	wall    = "wall"
)

// machineBusy is the CPU time all the machine's processes have used since
// it booted (the first line of /proc/stat, less idle and iowait).
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is in user already
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}

// othersCores is how many cores, on average, the processes that are not the
// bench's used between two cpuTimes readings: the noise of a shared machine.
func othersCores(before, after map[string]time.Duration) float64 {
	others := after[machine] - before[machine]
	for _, role := range cpuRoles {
		others -= after[role] - before[role]
	}
	return max(0, float64(others)/float64(after[wall]-before[wall]))
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

// cpuUsed is the CPU time each process spent per ask since before, and in
// all (under "all"), and how many cores other processes used meanwhile.
func (b *bench) cpuUsed(before map[string]time.Duration) (map[string]float64, float64, error) {
	after, err := b.cpuTimes()
	if err != nil {
		return nil, 0, err
	}
	perAsk := map[string]float64{}
	total := time.Duration(0)
	for _, role := range cpuRoles {
		if _, ok := after[role]; !ok {
			continue // no manager during the baseline
		}
		used := after[role] - before[role]
		total += used
		perAsk[role] = ms(used) / float64(b.s.Asks)
	}
	perAsk["all"] = ms(total) / float64(b.s.Asks)
	return perAsk, othersCores(before, after), nil
}
