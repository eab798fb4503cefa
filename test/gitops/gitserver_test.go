package gitops

import (
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitServer serves the bare repositories under root over Git's smart HTTP
// protocol on a loopback port: git http-backend run as a CGI program, the
// way a self-hosted Git server does, so that Flux clones from a real Git
// server and the test pushes to it with the git CLI.
type gitServer struct {
	root string
	url  string
	env  []string
}

// startGitServer starts a server that the end of t stops.
func startGitServer(t *testing.T, env []string) *gitServer {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	s := &gitServer{root: t.TempDir(), env: env}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.url = "http://" + l.Addr().String()
	handler := &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		// GIT_HTTP_EXPORT_ALL serves every repository under the root
		// without a git-daemon-export-ok file in each.
		Env:    append([]string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1"}, env...),
		Stderr: testWriter{t, "git http-backend: "},
	}
	srv := &http.Server{Handler: handler}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("the Git server: %v", err)
		}
	})
	return s
}

// newRepository creates an empty bare repository whose default branch is
// main and returns its URL.
func (s *gitServer) newRepository(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(s.root, name+".git")
	runGit(t, s.env, "", "init", "--quiet", "--bare", "--initial-branch=main", dir)
	// http-backend refuses pushes from anonymous clients (no REMOTE_USER)
	// unless the repository enables receive-pack.
	runGit(t, s.env, dir, "config", "http.receivepack", "true")
	return s.url + "/" + name + ".git"
}

// worktree is a clone of a repository that the test commits to and pushes
// from.
type worktree struct {
	t   *testing.T
	dir string
	env []string
}

// newWorktree starts a repository whose origin is url, with main checked
// out.
func newWorktree(t *testing.T, env []string, url string) *worktree {
	t.Helper()
	w := &worktree{t: t, dir: t.TempDir(), env: env}
	w.git("init", "--quiet", "--initial-branch=main")
	w.git("remote", "add", "origin", url)
	return w
}

func (w *worktree) git(args ...string) string {
	w.t.Helper()
	return runGit(w.t, w.env, w.dir, args...)
}

// write writes a file of the worktree, creating its directory.
func (w *worktree) write(path, content string) {
	w.t.Helper()
	full := filepath.Join(w.dir, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// commit commits every change of the worktree and returns the commit's SHA.
func (w *worktree) commit(message string) string {
	w.t.Helper()
	w.git("add", "--all")
	w.git("commit", "--quiet", "-m", message)
	return w.git("rev-parse", "HEAD")
}

// push pushes main to origin.
func (w *worktree) push() {
	w.t.Helper()
	w.git("push", "--quiet", "origin", "main")
}

// runGit runs git in dir with env added to a clean environment and returns
// its trimmed output.
func runGit(t *testing.T, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitEnv is the environment of every git the test runs, client and server:
// no system or user configuration (HOME is a directory of the test's), so
// that what the developer's ~/.gitconfig says does not change the result,
// and a fixed author.
func gitEnv(t *testing.T) []string {
	return []string{
		"HOME=" + t.TempDir(),
		"XDG_CONFIG_HOME=",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=hitl test", "GIT_AUTHOR_EMAIL=test@hitl.dev",
		"GIT_COMMITTER_NAME=hitl test", "GIT_COMMITTER_EMAIL=test@hitl.dev",
	}
}

// testWriter writes each write to t's log with a prefix.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
