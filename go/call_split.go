package slidelimit

import "unsafe"

// splitCall cuts core's flat call buffer into KEYS and ARGV, for both the
// cgo and the wasm path: part i is the next partLen(i) bytes of buf. The
// strings share buf, which the caller never writes again.
func splitCall(buf []byte, nKeys, nParts int, partLen func(i int) int) scriptCall {
	call := scriptCall{keys: make([]string, nKeys), args: make([]any, nParts-nKeys)}
	offset := 0
	part := func(i int) string {
		n := partLen(i)
		if n == 0 {
			return ""
		}
		s := unsafe.String(&buf[offset], n)
		offset += n
		return s
	}
	for i := range call.keys {
		call.keys[i] = part(i)
	}
	for i := range call.args {
		call.args[i] = part(nKeys + i)
	}
	return call
}
