package alerts

import "strings"

// OSFamilies are the OS values a rule can be scoped to. The minute counts
// hold an event's OS as its family: its device.os in lower case when it is
// one of these, else "other" (a blank OS too), so the counts stay narrow
// however clients spell their OS.
var OSFamilies = []string{"android", "ios", "ipados", "windows", "linux", "macos", "other"}

// OSFamily is the family an event's device.os is counted under.
func OSFamily(os string) string {
	l := strings.ToLower(os)
	for _, f := range OSFamilies[:len(OSFamilies)-1] {
		if l == f {
			return f
		}
	}
	return "other"
}

// UnknownCountry is the collector's country for a client it could not place
// (collector.UnknownCountry); the minute counts hold it for a blank country too.
const UnknownCountry = "ZZ"

// isoCountries are the ISO 3166-1 alpha-2 codes officially assigned.
const isoCountries = "" +
	"AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ " +
	"CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO " +
	"FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE " +
	"JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO " +
	"MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW " +
	"PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM " +
	"TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW"

// validCountry reports whether c (upper case) is blank, an assigned ISO
// 3166-1 alpha-2 code, or UnknownCountry.
func validCountry(c string) bool {
	if c == "" || c == UnknownCountry {
		return true
	}
	if len(c) != 2 || c[0] < 'A' || c[0] > 'Z' || c[1] < 'A' || c[1] > 'Z' {
		return false
	}
	return strings.Contains(" "+isoCountries+" ", " "+c+" ")
}

// validOS reports whether os (lower case) is blank or one of OSFamilies.
func validOS(os string) bool {
	if os == "" {
		return true
	}
	for _, f := range OSFamilies {
		if os == f {
			return true
		}
	}
	return false
}

// Scoped reports whether the rule is scoped to a country or an OS (it reads
// the scoped minute counts).
func (r *Rule) Scoped() bool { return r.Country != "" || r.OS != "" }
