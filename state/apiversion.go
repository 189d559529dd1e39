package state

import "fmt"

// API versions of the manifest format.
const (
	APIVersion       = "v1"
	APIVersionLegacy = "v0.1"
)

// CheckAPIVersion accepts v1, accepts v0.1 with a warning, and rejects
// anything else with the message Ankaios uses.
func CheckAPIVersion(v string) (warning string, err error) {
	switch v {
	case APIVersion:
		return "", nil
	case APIVersionLegacy:
		return fmt.Sprintf("API version '%s' is deprecated, please use '%s'", v, APIVersion), nil
	}
	return "", &FieldError{Path: "apiVersion", Reason: fmt.Sprintf("Unsupported API version. Received '%s', expected '%s'", v, APIVersion)}
}
