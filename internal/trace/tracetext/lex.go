package tracetext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memtrail/memtrail/internal/trace"
)

// token is the value of a key=value pair.
type token struct {
	text   string
	isList bool
	list   []string
}

// strings returns a list value as its items, and a quoted string as its
// words. An empty list is nil, as the Reader returns it.
func (t token) strings() []string {
	items := t.list
	if !t.isList {
		items = strings.Fields(t.text)
	}
	if len(items) == 0 {
		return nil
	}
	return items
}

// parseLine parses one line. It reports false for lines with no record.
func parseLine(line string) (trace.Record, bool, error) {
	rest := skipSpace(line)
	if rest == "" || rest[0] == '#' {
		return trace.Record{}, false, nil
	}
	name, rest := cutWord(rest)
	s, ok := syntaxByName(name)
	if !ok {
		return trace.Record{}, false, fmt.Errorf("unknown record %q", name)
	}
	rec := trace.Record{Kind: s.kind}
	if s.record == "" {
		rec.Event.Kind = s.kind
	}
	v, _ := s.value(&rec, true)
	seen := map[string]bool{}
	for {
		rest = skipSpace(rest)
		if rest == "" || rest[0] == '#' {
			return rec, true, nil
		}
		var key string
		var val token
		var err error
		key, val, rest, err = cutField(rest)
		if err != nil {
			return trace.Record{}, false, err
		}
		f, ok := s.field(key)
		if !ok {
			return trace.Record{}, false, fmt.Errorf("%s has no field %q", s.name, key)
		}
		if seen[key] {
			return trace.Record{}, false, fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
		if err := setValue(v.FieldByName(f.name), val); err != nil {
			return trace.Record{}, false, fmt.Errorf("field %q: %w", key, err)
		}
	}
}

func (s *syntax) field(key string) (field, bool) {
	for _, f := range s.fields {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

func skipSpace(s string) string { return strings.TrimLeft(s, " \t\r") }

// cutWord returns the bare word at the start of s and what follows it.
func cutWord(s string) (string, string) {
	i := strings.IndexAny(s, " \t\r")
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// cutField parses key=value at the start of s.
func cutField(s string) (string, token, string, error) {
	word, _ := cutWord(s)
	key, _, ok := strings.Cut(word, "=")
	if !ok || key == "" {
		return "", token{}, "", fmt.Errorf("want key=value, got %q", word)
	}
	s = s[len(key)+1:]
	val, rest, err := cutValue(s)
	if err != nil {
		return "", token{}, "", fmt.Errorf("field %q: %w", key, err)
	}
	return key, val, rest, nil
}

// cutValue parses the value at the start of s: quoted, a list or bare.
func cutValue(s string) (token, string, error) {
	switch {
	case strings.HasPrefix(s, `"`):
		text, rest, err := cutQuoted(s)
		return token{text: text}, rest, err
	case strings.HasPrefix(s, "["):
		list, rest, err := cutList(s[1:])
		return token{isList: true, list: list}, rest, err
	}
	text, rest := cutWord(s)
	return token{text: text}, rest, nil
}

func cutQuoted(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", fmt.Errorf("bad quoted string at %q", s)
	}
	text, err := strconv.Unquote(q)
	if err != nil {
		return "", "", fmt.Errorf("bad quoted string %s", q)
	}
	return text, s[len(q):], nil
}

// cutList parses the items of a list up to and past its closing bracket.
func cutList(s string) ([]string, string, error) {
	list := []string{}
	for {
		s = skipSpace(s)
		switch {
		case s == "":
			return nil, "", fmt.Errorf("list without a closing ]")
		case s[0] == ']':
			return list, s[1:], nil
		case s[0] == '"':
			item, rest, err := cutQuoted(s)
			if err != nil {
				return nil, "", err
			}
			list, s = append(list, item), rest
		default:
			i := strings.IndexAny(s, " \t\r]")
			if i < 0 {
				i = len(s)
			}
			list, s = append(list, s[:i]), s[i:]
		}
	}
}
