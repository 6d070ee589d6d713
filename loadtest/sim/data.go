package sim

type model struct {
	manufacturer string
	model        string
	os           string
	osVersions   []string
}

// models weighs devices roughly like a consumer fleet: many Samsung and Apple
// devices, a long tail of others, and a few desktops.
var models = []weighted[model]{
	{model{"Samsung", "SM-S918B", "android", []string{"13", "14", "15"}}, 9},
	{model{"Samsung", "SM-A546B", "android", []string{"13", "14"}}, 8},
	{model{"Samsung", "SM-A155F", "android", []string{"14", "15"}}, 6},
	{model{"Samsung", "SM-G991B", "android", []string{"12", "13", "14"}}, 4},
	{model{"Google", "Pixel 8", "android", []string{"14", "15"}}, 5},
	{model{"Google", "Pixel 7a", "android", []string{"13", "14", "15"}}, 4},
	{model{"Xiaomi", "Redmi Note 13", "android", []string{"13", "14"}}, 6},
	{model{"Xiaomi", "2201117TG", "android", []string{"11", "12", "13"}}, 3},
	{model{"OnePlus", "CPH2449", "android", []string{"13", "14"}}, 2},
	{model{"Motorola", "moto g54 5G", "android", []string{"13", "14"}}, 3},
	{model{"OPPO", "CPH2591", "android", []string{"14"}}, 2},
	{model{"Huawei", "VOG-L29", "android", []string{"10"}}, 1},
	{model{"Nokia", "TA-1462", "android", []string{"12", "13"}}, 1},
	{model{"Apple", "iPhone15,2", "ios", []string{"16.7.8", "17.5.1", "17.6.1", "18.1"}}, 8},
	{model{"Apple", "iPhone14,7", "ios", []string{"16.7.8", "17.5.1", "18.0.1"}}, 7},
	{model{"Apple", "iPhone16,1", "ios", []string{"17.6.1", "18.1", "18.2"}}, 6},
	{model{"Apple", "iPhone12,1", "ios", []string{"15.8.2", "16.7.8", "17.6.1"}}, 3},
	{model{"Apple", "iPad13,18", "ipados", []string{"17.5.1", "18.1"}}, 2},
	{model{"Apple", "MacBookPro18,3", "macos", []string{"14.6.1", "15.1"}}, 1},
	{model{"Dell", "XPS 13 9340", "windows", []string{"10.0.22631", "10.0.26100"}}, 1},
	{model{"Lenovo", "ThinkPad T14 Gen 4", "windows", []string{"10.0.19045", "10.0.22631"}}, 1},
}

var appVersions = []weighted[string]{
	{"5.12.0", 30}, {"5.11.3", 25}, {"5.11.2", 10}, {"5.10.0", 8}, {"5.9.7", 5},
	{"5.13.0-beta.2", 2}, {"4.20.1", 3},
}

var eventTypes = []weighted[string]{
	{"app.startup", 85}, {"threat.detected", 8}, {"app.resume", 5}, {"app.update", 2},
}

var threatsAndroid = []string{
	"root_detected", "debugger_attached", "emulator", "hooking_framework",
	"app_tampered", "untrusted_installer", "developer_options", "screen_recording",
	"malware_package", "insecure_wifi", "outdated_os", "usb_debugging",
}

var threatsIOS = []string{
	"jailbreak_detected", "debugger_attached", "simulator", "hooking_framework",
	"app_tampered", "passcode_not_set", "insecure_wifi", "outdated_os",
	"vpn_profile", "screen_recording",
}

var locales = []string{
	"en_GB", "en_US", "sv_SE", "zh_CN", "de_DE", "fr_FR", "es_ES", "pt_BR", "ja_JP", "fil_PH",
}

var networksKind = []string{"wifi", "cellular", "cellular", "wifi", "ethernet", "none"}

var packages = []string{
	"com.android.chrome", "com.whatsapp", "com.facebook.katana", "com.instagram.android",
	"org.telegram.messenger", "com.spotify.music", "com.google.android.youtube",
	"com.bank.mobile", "com.example.vpn", "eu.chainfire.supersu", "com.topjohnwu.magisk",
	"de.robv.android.xposed.installer", "com.netflix.mediaclient", "com.zhiliaoapp.musically",
}
