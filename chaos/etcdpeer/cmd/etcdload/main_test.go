package main

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    options
		wantErr bool
	}{
		{
			name: "endpoints are split and trimmed",
			args: []string{"--endpoints", "http://a:1, http://b:2,", "--clients", "16", "--duration", "3s", "--payload", "256"},
			want: options{endpoints: []string{"http://a:1", "http://b:2"}, clients: 16, count: 100000, duration: 3 * time.Second,
				warmup: time.Second, payload: 256, timeout: 5 * time.Second},
		},
		{name: "no endpoint", args: []string{"--clients", "1"}, wantErr: true},
		{name: "no clients", args: []string{"--endpoints", "http://a:1", "--clients", "0"}, wantErr: true},
		{name: "no count", args: []string{"--endpoints", "http://a:1", "--count", "0"}, wantErr: true},
		{name: "no duration", args: []string{"--endpoints", "http://a:1", "--duration", "0s"}, wantErr: true},
		{name: "payload too small", args: []string{"--endpoints", "http://a:1", "--payload", "8"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.args)
			if tt.wantErr {
				if !errors.Is(err, errUsage) {
					t.Fatalf("err %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestValueHasTheExactSizeAndDiffers(t *testing.T) {
	for _, n := range []int{16, 256, 4096} {
		a, b := value(n, 3, 1), value(n, 3, 2)
		if len(a) != n || len(b) != n {
			t.Fatalf("value sizes %d and %d, want %d", len(a), len(b), n)
		}
		if a == b {
			t.Fatalf("two puts of one client carry the same value %q", a)
		}
	}
}
