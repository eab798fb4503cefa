package manager

import (
	"io/fs"
	"testing"
)

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

func files(contents map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if c, ok := contents[name]; ok {
			return []byte(c), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestChooseMemoryTuning(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  MemoryTuning
	}{
		{"no container limit", nil, map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, MemoryTuning{GCPercent: 50}},
		{"cgroup v2 limit", nil, map[string]string{"/sys/fs/cgroup/memory.max": "268435456\n"}, MemoryTuning{GCPercent: 50, MemoryLimit: 241591910}},
		{"cgroup v1 limit", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1000\n"}, MemoryTuning{GCPercent: 50, MemoryLimit: 900}},
		{"cgroup v1 without a limit", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, MemoryTuning{GCPercent: 50}},
		{"no cgroup files", nil, nil, MemoryTuning{GCPercent: 50}},
		{"GOGC and GOMEMLIMIT win", map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB"},
			map[string]string{"/sys/fs/cgroup/memory.max": "268435456"}, MemoryTuning{}},
		{"GOGC alone keeps the limit", map[string]string{"GOGC": "off"},
			map[string]string{"/sys/fs/cgroup/memory.max": "1000"}, MemoryTuning{MemoryLimit: 900}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chooseMemoryTuning(env(tc.env), files(tc.files)); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
