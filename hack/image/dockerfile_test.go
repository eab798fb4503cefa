package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, COPY, USER, ...
	args string
}

// dockerfile reads the repository's Dockerfile into its stages.
func dockerfile(t *testing.T) [][]instruction {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var line strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || (l == "" && line.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(l, `\`); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(l)
		cmd, args, _ := strings.Cut(line.String(), " ")
		line.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %s before FROM", in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) != 2 {
		t.Fatalf("Dockerfile has %d stages, want 2 (build, then the runtime image)", len(stages))
	}
	return stages
}

func args(stage []instruction, cmd string) []string {
	var out []string
	for _, in := range stage {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// makeImageBinaries is the list of commands `make image` builds into the
// image, in the order it passes them to hack/image (the first is the
// entrypoint).
func makeImageBinaries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^image:.*\n(?:\t.*\n)*?\tfor b in ([a-z -]+); do`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Makefile: no `for b in ...` loop in the image target")
	}
	return strings.Fields(string(m[1]))
}

// The Dockerfile, which nobody can build here (no Docker engine), builds
// the image `make image` builds: the same commands, the same user, the same
// entrypoint, working directory and descriptive labels.
func TestDockerfileBuildsTheImageMakeImageBuilds(t *testing.T) {
	stages := dockerfile(t)
	build, runtime := stages[0], stages[1]
	want := makeImageBinaries(t)

	// The build stage builds ./cmd/X into /out/X for each of them, static.
	var built []string
	for _, run := range args(build, "RUN") {
		for _, m := range regexp.MustCompile(`go build [^&]*-o /out/([a-z-]+) \./cmd/([a-z-]+)`).FindAllStringSubmatch(run, -1) {
			if m[1] != m[2] {
				t.Errorf("Dockerfile builds ./cmd/%s into /out/%s", m[2], m[1])
			}
			built = append(built, m[1])
		}
	}
	if !slices.Equal(built, want) {
		t.Errorf("Dockerfile builds %v, make image %v", built, want)
	}
	if env := strings.Join(args(build, "ENV"), " "); !strings.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile's build stage does not set CGO_ENABLED=0 (ENV %s): its binaries would not be static", env)
	}

	// The runtime stage copies exactly those, to /.
	copies := args(runtime, "COPY")
	wantCopy := "--from=build"
	for _, b := range want {
		wantCopy += " /out/" + b
	}
	wantCopy += " /"
	if !slices.Equal(copies, []string{wantCopy}) {
		t.Errorf("Dockerfile's runtime stage copies %q, want %q", copies, wantCopy)
	}

	bins := t.TempDir()
	var paths []string
	for _, b := range want {
		paths = append(paths, goBuild(t, bins, b, "amd64", false))
	}
	img, err := Build(Options{Ref: "ghcr.io/hitl-dev/hitl:dev", Arch: "amd64", Binaries: paths})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := args(runtime, "USER"); !slices.Equal(got, []string{cf.Config.User}) {
		t.Errorf("Dockerfile's USER is %q, make image's %q", got, cf.Config.User)
	}
	if got := args(runtime, "WORKDIR"); !slices.Equal(got, []string{cf.Config.WorkingDir}) {
		t.Errorf("Dockerfile's WORKDIR is %q, make image's %q", got, cf.Config.WorkingDir)
	}
	entry := args(runtime, "ENTRYPOINT")
	var ep []string
	if len(entry) != 1 || json.Unmarshal([]byte(entry[0]), &ep) != nil {
		t.Fatalf("Dockerfile's ENTRYPOINT %q is not one JSON list (exec form)", entry)
	}
	if !slices.Equal(ep, cf.Config.Entrypoint) {
		t.Errorf("Dockerfile's ENTRYPOINT is %q, make image's %q", ep, cf.Config.Entrypoint)
	}
	label := strings.Join(args(runtime, "LABEL"), " ")
	for _, k := range []string{"org.opencontainers.image.title", "org.opencontainers.image.description"} {
		v, ok := cf.Config.Labels[k]
		if !ok {
			t.Errorf("make image sets no label %s", k)
			continue
		}
		if pair := k + `="` + v + `"`; !strings.Contains(label, pair) {
			t.Errorf("Dockerfile's LABEL has no %s", pair)
		}
	}
	for _, k := range []string{"org.opencontainers.image.source", "org.opencontainers.image.version", "org.opencontainers.image.revision"} {
		if !strings.Contains(label, k+"=") {
			t.Errorf("Dockerfile's LABEL has no %s", k)
		}
	}
	if from := args(runtime, "FROM"); len(from) != 1 || !strings.Contains(from[0], ":nonroot") {
		t.Errorf("Dockerfile's runtime stage is FROM %q, want a distroless :nonroot base", from)
	}
}
