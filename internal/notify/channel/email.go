package channel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Email sends each Message as a multipart email, plain text and HTML, over
// SMTP.
type Email struct {
	// Address is the SMTP server, host:port.
	Address string
	From    string
	To      []string
	// StartTLS upgrades the connection before anything else is sent, and
	// refuses a server that does not offer it.
	StartTLS bool
	// Username and Password, when Username is set, authenticate with
	// PLAIN, which is only ever sent over TLS (or to localhost).
	Username, Password string
	// TLSConfig verifies the server; nil verifies it against the system's
	// roots with the host of Address.
	TLSConfig *tls.Config
	// Timeout bounds one attempt; zero is 30s.
	Timeout time.Duration
	// Clock dates the mail; nil is the real clock.
	Clock clock.PassiveClock
}

// Send mails m once. SMTP replies 4xx, and failures to connect, are
// Transient.
func (e *Email) Send(ctx context.Context, m *Message) error {
	msg, err := EmailMessage(m, e.From, e.To, now(e.Clock))
	if err != nil {
		return err
	}
	timeout := e.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host, _, err := net.SplitHostPort(e.Address)
	if err != nil {
		return fmt.Errorf("email address %q: %w", e.Address, err)
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", e.Address)
	if err != nil {
		return &TransientError{Err: fmt.Errorf("connecting to %s: %w", e.Address, err)}
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		_ = conn.Close()
		return smtpError("greeting", err)
	}
	defer c.Close()
	if err := c.Hello("hitl-notify"); err != nil {
		return smtpError("HELO", err)
	}
	if e.StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fmt.Errorf("%s does not offer STARTTLS, which the channel requires", e.Address)
		}
		cfg := e.TLSConfig
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		cfg = cfg.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		if err := c.StartTLS(cfg); err != nil {
			return smtpError("STARTTLS", err)
		}
	}
	if e.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", e.Username, e.Password, host)); err != nil {
			return smtpError("AUTH", err)
		}
	}
	if err := c.Mail(e.From); err != nil {
		return smtpError("MAIL FROM", err)
	}
	for _, to := range e.To {
		if err := c.Rcpt(to); err != nil {
			return smtpError("RCPT TO "+to, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return smtpError("DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return smtpError("DATA", err)
	}
	if err := w.Close(); err != nil {
		return smtpError("DATA", err)
	}
	_ = c.Quit()
	return nil
}

// smtpError classes an SMTP failure: a 4xx reply and a network failure
// are Transient, a 5xx reply permanent.
func smtpError(step string, err error) error {
	err = fmt.Errorf("SMTP %s: %w", step, err)
	var te *textproto.Error
	if errors.As(err, &te) {
		if te.Code/100 == 4 {
			return &TransientError{Err: err}
		}
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, net.ErrClosed) {
		return &TransientError{Err: err}
	}
	return err
}

// EmailMessage is the RFC 5322 message of m from from to to, dated now: a
// multipart/alternative of plain text and HTML, both with the deep link.
// Its Message-ID derives from m.ID, so a resend is recognisably the same
// mail, and X-Hitl-Delivery carries m.ID itself.
func EmailMessage(m *Message, from string, to []string, now time.Time) ([]byte, error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	sum := sha256.Sum256([]byte(m.ID))
	subject := m.Title()
	if len(m.Question.Items) > 0 {
		subject += ": " + m.Question.Items[0].Question
	}
	headers := []string{
		"From: " + from,
		"To: " + strings.Join(to, ", "),
		"Subject: " + mime.QEncoding.Encode("utf-8", truncate("[hitl] "+subject, 200)),
		"Date: " + now.Format(time.RFC1123Z),
		"Message-ID: <" + hex.EncodeToString(sum[:16]) + "@hitl.dev>",
		"MIME-Version: 1.0",
		DeliveryHeader + ": " + m.ID,
		"Content-Type: multipart/alternative; boundary=" + mw.Boundary(),
	}
	var out bytes.Buffer
	out.WriteString(strings.Join(headers, "\r\n") + "\r\n\r\n")
	for _, part := range []struct {
		contentType string
		render      func(*bytes.Buffer) error
	}{
		{"text/plain; charset=utf-8", func(w *bytes.Buffer) error { plainText(w, m, now); return nil }},
		{"text/html; charset=utf-8", func(w *bytes.Buffer) error { return emailHTML.Execute(w, htmlData(m, now)) }},
	} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {part.contentType}, "Content-Transfer-Encoding": {"quoted-printable"}})
		if err != nil {
			return nil, err
		}
		var body bytes.Buffer
		if err := part.render(&body); err != nil {
			return nil, err
		}
		qp := quotedprintable.NewWriter(pw)
		if _, err := qp.Write(body.Bytes()); err != nil {
			return nil, err
		}
		if err := qp.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	out.Write(b.Bytes())
	return out.Bytes(), nil
}

// plainText is the plain-text body of m.
func plainText(w *bytes.Buffer, m *Message, now time.Time) {
	fmt.Fprintf(w, "%s\n\n", m.Title())
	for _, it := range m.Question.Items {
		if it.Header != "" {
			fmt.Fprintf(w, "%s\n", it.Header)
		}
		fmt.Fprintf(w, "%s\n", it.Question)
		for _, o := range it.Options {
			fmt.Fprintf(w, "  - %s\n", o)
		}
		w.WriteString("\n")
	}
	if s := m.Settlement; s != nil {
		for _, a := range s.Answers {
			fmt.Fprintf(w, "%s: %s\n", a.ID, answerText(a))
		}
		w.WriteString("\n")
	}
	if qu := m.Quorum; qu != nil {
		fmt.Fprintf(w, "Votes, %s:\n", qu.Summary())
		for _, v := range qu.Votes {
			fmt.Fprintf(w, "  %s\n", voteText(v))
		}
		w.WriteString("\n")
	}
	fmt.Fprintf(w, "Question %s/%s, agent %s\n", m.Question.Namespace, m.Question.Name, m.Question.Agent)
	if when := m.When(now); when != "" {
		fmt.Fprintf(w, "%s\n", when)
	}
	if m.Link != "" {
		fmt.Fprintf(w, "\nOpen it: %s\n", m.Link)
	}
}

type htmlView struct {
	Title, Question, When, Link string
	Items                       []Item
	Answers                     []htmlAnswer
	// Votes is the tally of quorum progress, VoteList its votes.
	Votes    string
	VoteList []htmlAnswer
}

type htmlAnswer struct{ ID, Text string }

func htmlData(m *Message, now time.Time) htmlView {
	v := htmlView{Title: m.Title(), Question: m.Question.Namespace + "/" + m.Question.Name + ", agent " + m.Question.Agent,
		When: m.When(now), Link: m.Link, Items: m.Question.Items}
	if s := m.Settlement; s != nil {
		for _, a := range s.Answers {
			v.Answers = append(v.Answers, htmlAnswer{a.ID, answerText(a)})
		}
	}
	if qu := m.Quorum; qu != nil {
		v.Votes = qu.Summary()
		for _, vote := range qu.Votes {
			v.VoteList = append(v.VoteList, htmlAnswer{vote.By, string(vote.Choice)})
		}
	}
	return v
}

// emailHTML is the HTML body; html/template escapes every text.
var emailHTML = template.Must(template.New("email").Parse(`<!DOCTYPE html>
<html><body style="font-family: sans-serif">
<h2>{{.Title}}</h2>
{{range .Items}}<p>{{if .Header}}<strong>{{.Header}}</strong><br>{{end}}{{.Question}}</p>
{{if .Options}}<ul>{{range .Options}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{end}}{{if .Answers}}<table>{{range .Answers}}<tr><th align="left">{{.ID}}</th><td>{{.Text}}</td></tr>{{end}}</table>
{{end}}{{if .Votes}}<p><strong>Votes, {{.Votes}}</strong></p>
<table>{{range .VoteList}}<tr><th align="left">{{.ID}}</th><td>{{.Text}}</td></tr>{{end}}</table>
{{end}}<p style="color: #555">Question {{.Question}}{{if .When}}<br>{{.When}}{{end}}</p>
{{if .Link}}<p><a href="{{.Link}}">Open in hitl</a></p>
{{end}}</body></html>
`))
