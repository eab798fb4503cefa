// The memory workload: the manager's memory at the stated scale, and
// reading its RSS and Go heap.

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func (b *bench) memory(ctx context.Context) error {
	// The stated scale: questions, each settled by a reply, and claims.
	if _, err := parallel(ctx, b.s.MemQuestions, 32, func(ctx context.Context, _ int) error {
		q := blocking(name("mem"))
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		return b.c.Create(ctx, answer(q))
	}); err != nil {
		return err
	}
	if _, err := parallel(ctx, b.s.MemClaims, 16, func(ctx context.Context, i int) error {
		q := timed(fmt.Sprintf("mem-claimed-%d", i), time.Hour)
		if err := b.c.Create(ctx, q); err != nil {
			return err
		}
		return b.c.Create(ctx, claim(q, hitlv1.MaxClaimLeaseSeconds*time.Second))
	}); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	rss, heap, err := b.managerMemory()
	if err != nil {
		return err
	}
	if err := b.saveProfile("heap", "manager-heap.pprof"); err != nil {
		return err
	}
	b.r.set("memory: manager RSS MiB", float64(rss)/(1<<20))
	b.r.set("memory: manager Go heap in use MiB", heap/(1<<20))
	b.r.check(fmt.Sprintf("manager RSS at %d questions+replies", b.s.MemQuestions), "<= 150MiB", fmt.Sprintf("%.0fMiB", float64(rss)/(1<<20)), rss <= 150<<20)
	return nil
}

// managerMemory reads the manager's resident memory (from /proc) and its
// Go heap in use (from its metrics), in bytes.
func (b *bench) managerMemory() (rss int64, heap float64, err error) {
	if rss, err = rssBytes(b.manager.Process.Pid); err != nil {
		return 0, 0, err
	}
	heap, err = b.scrape("go_memstats_heap_inuse_bytes")
	return rss, heap, err
}

func rssBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
