package schemas

import "github.com/invopop/jsonschema"

var _ Object = (*NotificationRule)(nil)

// DecodeNotificationRule is Decode for a document that must be a NotificationRule.
func DecodeNotificationRule(data []byte) (*NotificationRule, error) {
	return decodeAs[NotificationRule](data, KindNotificationRule)
}

// JSONSchemaExtend pins apiVersion and kind.
func (NotificationRule) JSONSchemaExtend(s *jsonschema.Schema) {
	pinKind(s, KindNotificationRule)
}

// JSONSchemaExtend bounds the labels a rule matches.
func (NotificationMatch) JSONSchemaExtend(s *jsonschema.Schema) {
	labels, _ := s.Properties.Get("labels")
	labelMapSchema(labels, maxLabelValueLength, labelValuePattern)
}

// JSONSchemaExtend bounds the headers and says that one of secret and secretRef is
// required.
func (WebhookTarget) JSONSchemaExtend(s *jsonschema.Schema) {
	if h, ok := s.Properties.Get("headers"); ok {
		h.MaxProperties = uint64p(maxWebhookHeaders)
		h.PropertyNames = &jsonschema.Schema{
			Type:      "string",
			MaxLength: uint64p(maxHeaderNameLength),
			Pattern:   headerNamePattern,
		}
		h.AdditionalProperties = &jsonschema.Schema{
			Type:      "string",
			MaxLength: uint64p(maxHeaderValueLength),
			Pattern:   headerValuePattern,
		}
	}
	s.OneOf = []*jsonschema.Schema{
		{Required: []string{"secret"}},
		{Required: []string{"secretRef"}},
	}
}

// JSONSchemaExtend says that at least one of webhook, email and subject is required.
func (NotificationRuleSpec) JSONSchemaExtend(s *jsonschema.Schema) {
	s.AnyOf = []*jsonschema.Schema{
		{Required: []string{"webhook"}},
		{Required: []string{"email"}},
		{Required: []string{"subject"}},
	}
}
