package slidelimit

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Code is one of the stable error codes every slidelimit binding shares (the
// numbers are the C ABI's). Each Code is also the sentinel for errors.Is:
//
//	if errors.Is(err, slidelimit.ErrUnavailable) { /* Redis down or slow */ }
type Code uint32

// One sentinel per core code, with the same numbers as the C ABI (ffi.go
// checks them against the header when cgo is on).
const (
	// ErrInvalidArgument: a policy, tenant, cost or time that breaks the
	// contract; the message names the field.
	ErrInvalidArgument Code = 1
	// ErrUnavailable: Redis could not be reached or did not answer within the
	// timeout. The check may or may not have been recorded.
	ErrUnavailable Code = 2
	// ErrScriptError: Redis ran the script and it failed.
	ErrScriptError Code = 3
	// ErrWrongType: the key holds a type the algorithm does not use.
	ErrWrongType Code = 4
	// ErrMalformedReply: the reply was not the five integers of the contract.
	ErrMalformedReply Code = 5
	// ErrPermissionDenied: the server refused the command for this user (ACL).
	ErrPermissionDenied Code = 6
	// ErrInternal: a bug in slidelimit.
	ErrInternal Code = 7
)

// ErrClosed is the cause of the error a Limiter returns when it is used after
// Close. That error is an *Error like every other failure, with the code
// ErrInvalidArgument (using a closed Limiter is a bug in the caller), so both
// errors.Is(err, ErrClosed) and errors.Is(err, ErrInvalidArgument) hold.
var ErrClosed = errors.New("limiter is closed")

// errClosed is what a Limiter used after Close returns.
func errClosed() error {
	return &Error{Code: ErrInvalidArgument, Message: ErrClosed.Error(), Err: ErrClosed}
}

var (
	namesOnce sync.Once
	names     map[Code]string
)

// String is the code's stable tag, e.g. "invalid_argument" (core's name).
func (c Code) String() string {
	namesOnce.Do(func() {
		names = make(map[Code]string)
		for _, known := range []Code{ErrInvalidArgument, ErrUnavailable, ErrScriptError,
			ErrWrongType, ErrMalformedReply, ErrPermissionDenied, ErrInternal} {
			names[known] = resultName(known)
		}
	})
	if name, ok := names[c]; ok {
		return name
	}
	return resultName(c)
}

// Error makes each Code usable as a sentinel error: "slidelimit: " and the tag.
func (c Code) Error() string { return "slidelimit: " + c.String() }

// Format prints the bare tag for %s, %v and %q ("invalid_argument", quoted
// for %q), as String says; without it fmt would print Error's text, which
// wins over String. Flags and width apply to the tag. The integer verbs (%d,
// %x, ...) print the C ABI's number.
func (c Code) Format(f fmt.State, verb rune) {
	switch verb {
	case 's', 'v', 'q':
		fmt.Fprintf(f, fmt.FormatString(f, verb), c.String())
	default:
		fmt.Fprintf(f, fmt.FormatString(f, verb), uint32(c))
	}
}

// Error is what every failing call returns: a stable Code, a message that
// names the field at fault when there is one, and the underlying cause (for
// example go-redis's error) when there is one.
type Error struct {
	Code    Code
	Message string
	Err     error

	// field is the field core named when it made the error (the C ABI
	// reports it beside the message), or the package's own for the few
	// errors it makes itself; never read back from Message.
	field string
}

// invalidArgument is an ErrInvalidArgument the package makes itself, about
// one of its own parameters (client, window): the message starts with the
// field's name, as core's do.
func invalidArgument(field, problem string) *Error {
	return &Error{Code: ErrInvalidArgument, Message: field + ": " + problem, field: field}
}

// forLimit names an error about a field of one limit as core names it
// (slidelimit_core::Error::for_limit): unchanged for a single limit,
// "algorithm" becomes "limits[1].algorithm" for the limit at 1 of several.
func forLimit(err error, i, n int) error {
	var e *Error
	if n < 2 || !errors.As(err, &e) || e.field == "" {
		return err
	}
	renamed := fmt.Sprintf("limits[%d].%s", i, e.field)
	return &Error{Code: e.Code, Message: renamed + strings.TrimPrefix(e.Message, e.field), Err: e.Err, field: renamed}
}

func (e *Error) Error() string {
	s := "slidelimit: " + e.Code.String()
	if e.Message != "" {
		s += ": " + e.Message
	}
	// Core's messages for error replies already quote Redis's text.
	if e.Err != nil && !strings.Contains(e.Message, e.Err.Error()) {
		s += ": " + e.Err.Error()
	}
	return s
}

// Field is the field an ErrInvalidArgument is about ("limit", "tenant",
// "timeout_ms", ...), and "" for every other code. Core decides it when it
// makes the error and the C ABI hands it over beside the message, so it is
// never parsed out of Message; an *Error built by hand has none.
func (e *Error) Field() string {
	if e.Code != ErrInvalidArgument {
		return ""
	}
	return e.field
}

// Is matches the sentinel of the error's code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

// Unwrap exposes the cause (so errors.Is(err, context.DeadlineExceeded) works).
func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of a slidelimit error, and false for any other error.
func CodeOf(err error) (Code, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	var c Code
	if errors.As(err, &c) {
		return c, true
	}
	return 0, false
}
