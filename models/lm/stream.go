package lm

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// errStopped ends decoding early from a step callback (a stop string was
// produced).
var errStopped = errors.New("stop string reached")

// textStream turns generated ids, one per decoding step, into the text a
// server returns: decode re-renders all ids so far (byte-level and
// SentencePiece pieces only make sense together), stop strings cut it
// (finish "stop"), and OnText receives deltas that hold back the characters
// that could still start a stop string and never split a UTF-8 character.
type textStream struct {
	decode                func(ids []int) string
	stop                  []string
	onText                func(delta string) error
	hold                  int // bytes held back while they could start a stop string
	ids                   []int
	text, emitted, finish string
}

func newTextStream(decode func([]int) string, opt GenOptions) *textStream {
	s := &textStream{decode: decode, stop: opt.Stop, onText: opt.OnText, finish: "length"}
	for _, st := range opt.Stop {
		s.hold = max(s.hold, len(st)-1)
	}
	return s
}

// push adds one generated id; errStopped when a stop string ended the text,
// or OnText's error.
func (s *textStream) push(id int) error {
	s.ids = append(s.ids, id)
	s.text = s.decode(s.ids)
	if cut, ok := CutStop(s.text, s.stop); ok {
		s.text, s.finish = cut, "stop"
		return errStopped
	}
	if s.onText != nil && strings.HasPrefix(s.text, s.emitted) && len(s.text)-s.hold > len(s.emitted) {
		cut := len(s.text) - s.hold
		for cut > len(s.emitted) && cut < len(s.text) && !utf8.RuneStart(s.text[cut]) {
			cut--
		}
		if cut > len(s.emitted) {
			d := s.text[len(s.emitted):cut]
			s.emitted = s.text[:cut]
			return s.onText(d)
		}
	}
	return nil
}

// flush sends what push held back.
func (s *textStream) flush() error {
	if s.onText != nil && len(s.text) > len(s.emitted) && strings.HasPrefix(s.text, s.emitted) {
		return s.onText(s.text[len(s.emitted):])
	}
	return nil
}
