// Package forward turns outbox events into the lines SIEMs read (CEF in
// RFC 5424 syslog, OCSF Detection Finding JSON) and sends them: syslog over
// TCP or TLS with octet-counting framing, NDJSON over HTTP. Runner feeds
// one forwarder from its cursor, at least once.
package forward

import (
	"encoding/json"
	"strconv"
	"strings"

	"threatview/alerts"
)

// OCSFVersion is the OCSF schema version of the JSON lines.
const OCSFVersion = "1.2.0"

// Product names in CEF headers and OCSF metadata.
const (
	vendor  = "Threat View"
	product = "Threat View"
)

// pen is the private enterprise number of the structured-data id; 32473 is
// the one RFC 5612 reserves for documentation and examples.
const sdID = "threatview@32473"

// Severity of a threat event: 7 of 10 in CEF, High (4) in OCSF.
const (
	cefSeverity  = 7
	ocsfSeverity = 4
)

// AppendCEF appends e as one CEF:0 record.
func AppendCEF(b []byte, e *alerts.Event, version string) []byte {
	b = append(b, "CEF:0|"...)
	b = cefHeader(b, vendor)
	b = append(b, '|')
	b = cefHeader(b, product)
	b = append(b, '|')
	b = cefHeader(b, version)
	b = append(b, '|')
	b = cefHeader(b, "threat:"+e.Threats[0])
	b = append(b, '|')
	b = cefHeader(b, "Threat detected: "+strings.Join(e.Threats, ", "))
	b = append(b, '|')
	b = strconv.AppendInt(b, cefSeverity, 10)
	b = append(b, '|')
	// The separator is decided by position, not by the byte before: a
	// value may itself end in '|' (pipes are not escaped in extensions),
	// and a separator left out there glued the next key onto the value.
	first := true
	ext := func(k, v string) {
		if v == "" {
			return
		}
		if !first {
			b = append(b, ' ')
		}
		first = false
		b = append(b, k...)
		b = append(b, '=')
		b = cefValue(b, v)
	}
	custom := func(n, label, v string) {
		if v != "" {
			ext("cs"+n+"Label", label)
			ext("cs"+n, v)
		}
	}
	ext("rt", strconv.FormatInt(e.ReceivedAt.UnixMilli(), 10))
	ext("start", strconv.FormatInt(e.OccurredAt.UnixMilli(), 10))
	ext("externalId", e.ID)
	ext("cat", e.Type)
	custom("1", "appId", e.AppID)
	custom("2", "threats", strings.Join(e.Threats, ","))
	custom("3", "os", strings.TrimSpace(e.OS+" "+e.OSVersion))
	custom("4", "deviceModel", e.DeviceModel)
	custom("5", "appVersion", e.AppVersion)
	custom("6", "country", e.Country)
	return b
}

// cefHeader escapes a header field: backslash and pipe; line breaks become
// spaces (a header cannot hold one).
func cefHeader(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '|':
			b = append(b, '\\', c)
		case '\r', '\n':
			b = append(b, ' ')
		default:
			b = append(b, c)
		}
	}
	return b
}

// cefValue escapes an extension value (CEF 25, "Character Encoding"):
// backslash and equals with a backslash, line breaks as \n and \r. Pipes
// stay as they are in extensions.
func cefValue(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '=':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, c)
		}
	}
	return b
}

// AppendSyslog appends one RFC 5424 message (without framing): facility
// local4, severity warning, the event id and app in structured data, and
// msg as MSG.
func AppendSyslog(b []byte, e *alerts.Event, hostname string, msg []byte) []byte {
	b = append(b, "<164>1 "...)
	b = e.ReceivedAt.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	b = append(b, ' ')
	b = append(b, hostname...)
	b = append(b, " threatview - threat ["...)
	b = append(b, sdID...)
	b = append(b, ` event_id="`...)
	b = sdValue(b, e.ID)
	b = append(b, `" app_id="`...)
	b = sdValue(b, e.AppID)
	b = append(b, `"] `...)
	return append(b, msg...)
}

// sdValue escapes a structured-data parameter value (RFC 5424 6.3.3).
func sdValue(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', ']':
			b = append(b, '\\', c)
		default:
			b = append(b, c)
		}
	}
	return b
}

// OCSF is one Detection Finding (class 2004, category 2).
type OCSF struct {
	CategoryUID  int          `json:"category_uid"`
	CategoryName string       `json:"category_name"`
	ClassUID     int          `json:"class_uid"`
	ClassName    string       `json:"class_name"`
	ActivityID   int          `json:"activity_id"`
	ActivityName string       `json:"activity_name"`
	TypeUID      int          `json:"type_uid"`
	TypeName     string       `json:"type_name"`
	SeverityID   int          `json:"severity_id"`
	Severity     string       `json:"severity"`
	StatusID     int          `json:"status_id"`
	Status       string       `json:"status"`
	Time         int64        `json:"time"`
	Message      string       `json:"message"`
	Metadata     ocsfMetadata `json:"metadata"`
	FindingInfo  ocsfFinding  `json:"finding_info"`
	Device       ocsfDevice   `json:"device"`
	Unmapped     ocsfUnmapped `json:"unmapped"`
}

type ocsfMetadata struct {
	Version    string      `json:"version"`
	UID        string      `json:"uid"`
	LoggedTime int64       `json:"logged_time"`
	Product    ocsfProduct `json:"product"`
}

type ocsfProduct struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
	Version    string `json:"version"`
}

type ocsfFinding struct {
	UID           string   `json:"uid"`
	Title         string   `json:"title"`
	Types         []string `json:"types"`
	FirstSeenTime int64    `json:"first_seen_time"`
	CreatedTime   int64    `json:"created_time"`
}

type ocsfDevice struct {
	TypeID   int           `json:"type_id"`
	Type     string        `json:"type"`
	Model    string        `json:"model,omitempty"`
	OS       ocsfOS        `json:"os"`
	Location *ocsfLocation `json:"location,omitempty"`
}

type ocsfOS struct {
	Name    string `json:"name"`
	TypeID  int    `json:"type_id"`
	Version string `json:"version,omitempty"`
}

type ocsfLocation struct {
	Country string `json:"country"`
}

type ocsfUnmapped struct {
	AppID      string `json:"app_id"`
	AppVersion string `json:"app_version,omitempty"`
	EventType  string `json:"event_type"`
}

// osTypes maps our OS names (lower case) to OCSF os.type_id.
var osTypes = map[string]int{
	"windows": 100, "linux": 200, "android": 201, "macos": 300, "ios": 301, "ipados": 302,
}

// NewOCSF maps e to a Detection Finding.
func NewOCSF(e *alerts.Event, version string) OCSF {
	osName := e.OS
	if osName == "" {
		osName = "unknown"
	}
	f := OCSF{
		CategoryUID: 2, CategoryName: "Findings",
		ClassUID: 2004, ClassName: "Detection Finding",
		ActivityID: 1, ActivityName: "Create",
		TypeUID: 200401, TypeName: "Detection Finding: Create",
		SeverityID: ocsfSeverity, Severity: "High",
		StatusID: 1, Status: "New",
		Time:    e.OccurredAt.UnixMilli(),
		Message: "Threat detected: " + strings.Join(e.Threats, ", "),
		Metadata: ocsfMetadata{Version: OCSFVersion, UID: e.ID, LoggedTime: e.ReceivedAt.UnixMilli(),
			Product: ocsfProduct{Name: product, VendorName: vendor, Version: version}},
		FindingInfo: ocsfFinding{UID: e.ID, Title: "Threat detected: " + strings.Join(e.Threats, ", "),
			Types: e.Threats, FirstSeenTime: e.OccurredAt.UnixMilli(), CreatedTime: e.ReceivedAt.UnixMilli()},
		Device: ocsfDevice{TypeID: 0, Type: "Unknown", Model: e.DeviceModel,
			OS: ocsfOS{Name: osName, TypeID: osTypes[strings.ToLower(e.OS)], Version: e.OSVersion}},
		Unmapped: ocsfUnmapped{AppID: e.AppID, AppVersion: e.AppVersion, EventType: e.Type},
	}
	if e.Country != "" {
		f.Device.Location = &ocsfLocation{Country: e.Country}
	}
	return f
}

// AppendOCSF appends e as one JSON line (with its newline).
func AppendOCSF(b []byte, e *alerts.Event, version string) []byte {
	j, _ := json.Marshal(NewOCSF(e, version)) // plain structs: never fails
	b = append(b, j...)
	return append(b, '\n')
}
