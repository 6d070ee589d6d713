package collector

import "threatview/platform/wire"

// AppendRequest appends the events of one request to b as one request of a
// version-2 events message (wire.RequestPrefix, the events, wire.RequestSuffix):
// the fragment the publisher joins with other requests' fragments. Keeping
// each request's events apart lets the processor set one request aside
// without the others.
func AppendRequest(b []byte, events []wire.Event) []byte {
	b = append(b, wire.RequestPrefix...)
	for i := range events {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendEvent(b, &events[i])
	}
	return append(b, wire.RequestSuffix...)
}

// AppendEnvelope appends a whole events message holding requests (each the
// events of one request, in order) to b, framed the way the publisher
// frames them (wire.EventsPrefix, requests joined by commas,
// wire.EventsSuffix). Tests use it to check what the processor will decode.
func AppendEnvelope(b []byte, requests ...[]wire.Event) []byte {
	b = append(b, wire.EventsPrefix...)
	for i, events := range requests {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendRequest(b, events)
	}
	return append(b, wire.EventsSuffix...)
}
