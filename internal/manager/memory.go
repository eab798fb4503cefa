package manager

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGCPercent is the manager's GOGC when the environment sets none.
// Nearly all of its heap is the informer cache, which lives as long as the
// process: collecting at half the live heap's growth rather than all of it
// keeps the resident size about a quarter smaller for a little more GC work.
const DefaultGCPercent = 50

// memoryLimitShare is the part of the container's memory limit given to
// the Go heap as its soft limit, leaving the rest to stacks and the binary.
const memoryLimitShare = 0.9

// cgroupMemoryLimitFiles hold a container's memory limit, cgroup v2 first.
var cgroupMemoryLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// MemoryTuning is what TuneMemory chose; zero fields were left to the Go
// runtime (its defaults, or GOGC and GOMEMLIMIT from the environment).
type MemoryTuning struct {
	GCPercent   int
	MemoryLimit int64
}

// TuneMemory sets the garbage collector's target to DefaultGCPercent and
// its soft memory limit to 90% of the container's, unless GOGC or
// GOMEMLIMIT say otherwise.
func TuneMemory() MemoryTuning {
	t := chooseMemoryTuning(os.Getenv, os.ReadFile)
	if t.GCPercent != 0 {
		debug.SetGCPercent(t.GCPercent)
	}
	if t.MemoryLimit != 0 {
		debug.SetMemoryLimit(t.MemoryLimit)
	}
	return t
}

func chooseMemoryTuning(getenv func(string) string, readFile func(string) ([]byte, error)) MemoryTuning {
	var t MemoryTuning
	if getenv("GOGC") == "" {
		t.GCPercent = DefaultGCPercent
	}
	if getenv("GOMEMLIMIT") != "" {
		return t
	}
	for _, f := range cgroupMemoryLimitFiles {
		data, err := readFile(f)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) when there is no limit.
		limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err == nil && limit > 0 && limit < 1<<50 {
			t.MemoryLimit = int64(float64(limit) * memoryLimitShare)
		}
		break
	}
	return t
}
