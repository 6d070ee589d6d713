package collector

import "threatview/platform/wire"

// AppendEnvelope appends a whole events message holding requests (each the
// events of one request, in order) to b, framed the way the publisher
// frames them. Tests use it to check what the processor will decode.
func AppendEnvelope(b []byte, requests ...[]wire.Event) []byte {
	b = append(b, `{"v":1,"events":[`...)
	first := true
	for _, events := range requests {
		for i := range events {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = AppendEvent(b, &events[i])
		}
	}
	return append(b, `]}`...)
}
