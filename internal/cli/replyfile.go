package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// A reply manifest is the reply of answer, approve or deny prepared for a
// GitOps repository: --dry-run=client prints it, --to-file writes it with
// a comment for the reviewer of the commit. It is applied later, by
// whoever applies it (with GitOps, the engine), so it carries no
// spec.answeredBy: the API server stamps that identity.

// checkPreparable refuses a manifest for a question that no reply can
// answer any more (NOT_ANSWERABLE: Settled, Cancelled or being
// cancelled), rather than have it committed, reviewed and applied for
// nothing. A queued late reply (REPLY_QUEUED) may be withdrawn before the
// manifest is applied, so it only gets a warning.
func (o *replyOptions) checkPreparable(q *hitlv1.UserQuestion) error {
	code, why := hitlv1.Unanswerable(q.Name, &q.Spec, &q.Status)
	switch code {
	case "":
		return nil
	case hitlv1.CodeReplyQueued:
		fmt.Fprintf(o.streams.ErrOut, "warning: %s: %s; this reply is rejected if it is applied while that one waits\n", code, why)
		return nil
	}
	return &validation.Error{Code: code, Rule: why}
}

// writeManifest names the reply (manifestName) and prints it in the -o
// format, YAML by default (--dry-run=client), or writes it as YAML after
// its header to --to-file.
func (o *replyOptions) writeManifest(ctx context.Context, q *hitlv1.UserQuestion, reply *hitlv1.QuestionReply) error {
	name, err := o.manifestName(ctx, q)
	if err != nil {
		return err
	}
	reply.Name = name
	if o.output.isHuman() {
		*o.output.print.OutputFormat = "yaml"
	}
	if o.toFile == "" {
		return o.output.printObject(o.streams.Out, reply)
	}
	data := bytes.NewBuffer(replyHeader(q, reply))
	if err := o.output.printObject(data, reply); err != nil {
		return err
	}
	if err := readsBack(data.Bytes(), reply); err != nil {
		return err
	}
	if o.toFile == "-" {
		_, err := o.streams.Out.Write(data.Bytes())
		return err
	}
	return o.writeReplyFile(q, reply, data.Bytes())
}

// manifestName is the name of the reply in a manifest: --name, or the
// question's name and a hash of the user's name as the API server
// authenticates it. A manifest needs a fixed name, and this one is stable:
// preparing the reply again rewrites the same reply (the same file), which
// the engine updates rather than adding a second vote, while two people's
// replies to one question never share a name.
func (o *replyOptions) manifestName(ctx context.Context, q *hitlv1.UserQuestion) (string, error) {
	if o.replyName != "" {
		return o.replyName, nil
	}
	me, err := o.whoAmI(ctx)
	if err != nil {
		return "", fmt.Errorf("naming the reply after you: %w; name it with --name", err)
	}
	return stableReplyName(q.Name, me), nil
}

// stableReplyName is question-<10 hex digits of the SHA-256 of username>,
// the question's name cut so that the whole is a valid object name.
func stableReplyName(question, username string) string {
	sum := sha256.Sum256([]byte(username))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	if n := utilvalidation.DNS1123SubdomainMaxLength - len(suffix); len(question) > n {
		// A name's parts must end in a letter or digit.
		question = strings.TrimRight(question[:n], ".-")
	}
	return question + suffix
}

// replyHeader is the comment that opens a reply file, for the reviewer of
// the commit: the question answered, what the reply is bound to, and what
// it chooses.
func replyHeader(q *hitlv1.UserQuestion, reply *hitlv1.QuestionReply) []byte {
	digest := q.Status.SpecDigest
	if digest == "" {
		digest = "(none yet: the reply is bound by uid only)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Reply %s to question %s/%s of agent %s, prepared with kubectl hitl.\n", reply.Name, q.Namespace, q.Name, q.Spec.Agent)
	fmt.Fprintf(&b, "It answers only that question as it was read:\n  uid:         %s\n  spec digest: %s\n", q.UID, digest)
	b.WriteString("Chosen:\n")
	printAnswers(&b, reply.Spec.Answers)
	fmt.Fprintf(&b, "The question: kubectl hitl show %s -n %s -o markdown\n", q.Name, q.Namespace)
	b.WriteString("Whoever applies this file answers (spec.answeredBy is stamped by the API server).\n")
	return comment(b.String())
}

// yamlBreaks escapes what YAML reads as a line break besides "\n": a
// comment holding one would end there, and the rest of its line would be
// read as YAML. sigs.k8s.io/yaml reads YAML 1.1, whose breaks include
// NEL, LS and PS.
var yamlBreaks = strings.NewReplacer("\r", `\r`, "\u0085", `\u0085`, "\u2028", `\u2028`, "\u2029", `\u2029`)

// comment makes text YAML comment lines, each line of it one, whatever
// the labels and the custom text it quotes hold.
func comment(text string) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		b.WriteString(strings.TrimRight("# "+yamlBreaks.Replace(line), " ") + "\n")
	}
	return b.Bytes()
}

// readsBack checks that the manifest reads back as the reply it was made
// of, so that what is committed is what was chosen: sigs.k8s.io/yaml
// writes a NEL (U+0085) in a label or custom text as it is, and reads it
// back as a space.
func readsBack(data []byte, reply *hitlv1.QuestionReply) error {
	var back hitlv1.QuestionReply
	if err := yaml.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back.Spec, reply.Spec) {
		return errors.New("the reply does not read back from its YAML as it was made: an answer holds a character YAML changes (U+0085)")
	}
	return nil
}

// writeReplyFile writes the reply file atomically, unless it would
// replace another file than a reply to the same question without
// --overwrite (checkReplaceable).
func (o *replyOptions) writeReplyFile(q *hitlv1.UserQuestion, reply *hitlv1.QuestionReply, data []byte) error {
	if !o.overwrite {
		if err := checkReplaceable(o.toFile, q); err != nil {
			return err
		}
	}
	if err := writeAtomic(o.toFile, data); err != nil {
		return fmt.Errorf("writing %s: %w", o.toFile, err)
	}
	fmt.Fprintf(o.streams.Out, "reply %s to question %s written to %s: commit it for the GitOps engine to apply\n", reply.Name, q.Name, o.toFile)
	return nil
}

// checkReplaceable refuses to replace a file that holds anything but one
// QuestionReply to q in q's namespace (under any name: an earlier reply of
// the user's to q, which --to-file rewrites), so that a mistyped path
// never replaces another manifest of the repository. A missing or empty
// file may be written.
func checkReplaceable(path string, q *hitlv1.UserQuestion) error {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", path, err)
	case len(bytes.TrimSpace(data)) == 0 || isReplyTo(data, q):
		return nil
	}
	return fmt.Errorf("%s holds something other than a reply to question %s/%s: not replaced (--overwrite replaces it)", path, q.Namespace, q.Name)
}

// isReplyTo reports whether data is one YAML document, a QuestionReply to
// q; documents that hold only comments do not count.
func isReplyTo(data []byte, q *hitlv1.UserQuestion) bool {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var replies []hitlv1.QuestionReply
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		var fields map[string]any
		if err != nil || yaml.Unmarshal(doc, &fields) != nil {
			return false
		}
		if len(fields) == 0 {
			continue
		}
		var r hitlv1.QuestionReply
		if yaml.Unmarshal(doc, &r) != nil {
			return false
		}
		replies = append(replies, r)
	}
	if len(replies) != 1 {
		return false
	}
	r := replies[0]
	return r.APIVersion == hitlv1.GroupVersion.String() && r.Kind == "QuestionReply" &&
		r.Namespace == q.Namespace && r.Spec.QuestionRef.Name == q.Name
}

// writeAtomic replaces path with data through a temporary file beside it
// and a rename: git, an editor or a watching engine never reads half a
// reply, and a failed write leaves the old file whole. The file keeps the
// mode of the one it replaces; a new one is 0644, as a file in a
// repository is.
func writeAtomic(path string, data []byte) (err error) {
	mode := fs.FileMode(0o644)
	if info, statErr := os.Stat(path); statErr == nil {
		mode = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
