package server

import "testing"

func TestOrigins(t *testing.T) {
	t.Parallel()
	o := newOrigins([]string{"https://Console.example.com", "https://*.apps.example.com", "http://localhost:*"})
	for origin, want := range map[string]bool{
		"https://console.example.com":           true,
		"HTTPS://CONSOLE.EXAMPLE.COM":           true,
		"https://console.example.com:8443":      false,
		"http://console.example.com":            false,
		"https://a.apps.example.com":            true,
		"https://a.b.apps.example.com":          true,
		"https://.apps.example.com":             false, // the * stands for something
		"https://apps.example.com":              false,
		"https://evil.example/apps.example.com": false,
		"https://a.apps.example.com.evil.net":   false,
		"http://localhost:3000":                 true,
		"http://localhost:":                     false,
		"":                                      false,
		"null":                                  false,
	} {
		if got := o.allowed(origin); got != want {
			t.Errorf("allowed(%q) = %v, want %v", origin, got, want)
		}
	}
	if !newOrigins([]string{"*"}).allowed("https://anything.example") {
		t.Error(`"*" refused an origin`)
	}
	if newOrigins(nil).allowed("https://console.example.com") {
		t.Error("no origins allowed one")
	}
}
