package client

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/xaalis/xaalis/api"
)

// schemaTypes maps every object schema of api/openapi.yaml to the client's
// type for it.
var schemaTypes = map[string]any{
	"ErrorEnvelope":                errorEnvelope{},
	"PlanCreateRequest":            PlanParams{},
	"Plan":                         Plan{},
	"PlanResponse":                 envelope[Plan]{},
	"Pagination":                   Pagination{},
	"PlanList":                     listEnvelope[Plan]{},
	"SubscriptionCreateRequest":    SubscriptionParams{},
	"Subscription":                 Subscription{},
	"SubscriptionResponse":         envelope[Subscription]{},
	"SubscriptionList":             listEnvelope[Subscription]{},
	"Customer":                     Customer{},
	"CustomerResponse":             envelope[Customer]{},
	"CustomerList":                 listEnvelope[Customer]{},
	"NextAction":                   NextAction{},
	"PaymentCreateRequest":         PaymentParams{},
	"PaymentFields":                PaymentParams{},
	"PaymentPrecheckRequest":       PaymentParams{},
	"PaymentPrecheck":              PaymentPrecheck{},
	"PaymentPrecheckProvider":      PaymentPrecheckProvider{},
	"PaymentPrecheckError":         PaymentPrecheckError{},
	"PaymentPrecheckPayer":         PaymentPrecheckPayer{},
	"PaymentPrecheckResponse":      envelope[PaymentPrecheck]{},
	"PaymentSimulateRequest":       SimulateParams{},
	"Transaction":                  Transaction{},
	"TransactionResponse":          envelope[Transaction]{},
	"PaymentStatus":                PaymentStatus{},
	"PaymentStatusResponse":        envelope[PaymentStatus]{},
	"TransactionList":              listEnvelope[Transaction]{},
	"SplitCreateRequest":           SplitParams{},
	"SplitItemInput":               SplitItemParams{},
	"SplitItem":                    SplitItem{},
	"SplitCreateResponse":          envelope[[]SplitItem]{},
	"SplitList":                    listEnvelope[SplitItem]{},
	"Balance":                      Balance{},
	"BalanceResponse":              envelope[Balance]{},
	"PayoutCreateRequest":          PayoutParams{},
	"RefundCreateRequest":          RefundParams{},
	"DisputeRespondRequest":        DisputeResponseParams{},
	"Dispute":                      Dispute{},
	"DisputeResponse":              envelope[Dispute]{},
	"DisputeList":                  listEnvelope[Dispute]{},
	"PayoutRequestCreateRequest":   PayoutRequestParams{},
	"PayoutDestination":            PayoutDestination{},
	"PayoutRequest":                PayoutRequest{},
	"PayoutRequestResponse":        envelope[PayoutRequest]{},
	"PayoutRequestList":            listEnvelope[PayoutRequest]{},
	"Settlement":                   Settlement{},
	"SettlementList":               listEnvelope[Settlement]{},
	"WebhookEndpointCreateRequest": WebhookEndpointParams{},
	"WebhookSecretRotateRequest":   RotateSecretParams{},
	"WebhookTestRequest":           WebhookTestParams{},
	"WebhookEndpoint":              WebhookEndpoint{},
	"WebhookEndpointResponse":      envelope[WebhookEndpoint]{},
	"WebhookEndpointList":          listEnvelope[WebhookEndpoint]{},
	"WebhookSecret":                WebhookSecret{},
	"WebhookSecretResponse":        envelope[WebhookSecret]{},
	"WebhookAttempt":               WebhookAttempt{},
	"WebhookDelivery":              WebhookDelivery{},
	"Event":                        Event{},
	"EventResponse":                envelope[Event]{},
	"EventList":                    listEnvelope[Event]{},
	"EventRedeliverRequest":        RedeliverParams{},
	"Redelivery":                   Redelivery{},
	"RedeliveryResponse":           envelope[Redelivery]{},
	"RouteHealth":                  RouteHealth{},
	"ProviderInfo":                 ProviderInfo{},
	"ProviderList":                 listEnvelope[ProviderInfo]{},
}

// enumTypes maps every enumeration schema to the client's string type;
// its constants must be the schema's values.
var enumTypes = map[string]string{
	"ErrorCode": "ErrorCode", "Currency": "Currency", "Interval": "Interval", "SubscriptionStatus": "SubscriptionStatus",
	"Country": "Country", "Provider": "Provider", "TransactionStatus": "TransactionStatus", "NextActionType": "NextActionType",
	"SplitItemStatus": "SplitItemStatus", "DisputeStatus": "DisputeStatus", "PayoutRequestStatus": "PayoutRequestStatus",
	"WebhookPayloadFormat": "PayloadFormat", "DeliveryStatus": "DeliveryStatus",
}

// notInClient are the schemas of routes a merchant's program does not
// call.
var notInClient = map[string]string{
	"HealthStatus":         "the probes of the operator's load balancer",
	"ProviderNotification": "sent by providers to Xaalis",
	"NotificationAck":      "answered to providers",
	"CheckoutStatus":       "the hosted page's own poll",
	"CheckoutProviderForm": "a browser form of the hosted page",
	"CheckoutOTPForm":      "a browser form of the hosted page",
	"CheckoutSimulateForm": "a browser form of the hosted page",
	"Metadata":             "the map type Metadata",
}

// TestContractSchemas holds every schema of api/openapi.yaml against the
// client's types: a property the type lacks, or a field the schema lacks,
// fails, at every depth; so does a schema without a type.
func TestContractSchemas(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	consts := enumConstants(t)
	names := make([]string, 0, len(doc.Components.Schemas))
	for name := range doc.Components.Schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ref := doc.Components.Schemas[name]
		if v, ok := schemaTypes[name]; ok {
			compareSchema(t, name, ref, reflect.TypeOf(v))
			continue
		}
		if goType, ok := enumTypes[name]; ok {
			var want []string
			for _, v := range ref.Value.Enum {
				want = append(want, v.(string))
			}
			got := consts[goType]
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: the constants of %s are %v, the contract's values %v", name, goType, got, want)
			}
			continue
		}
		if _, ok := notInClient[name]; !ok {
			t.Errorf("schema %s has no type in pkg/client: add one to the client and to schemaTypes", name)
		}
	}
	for name := range schemaTypes {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("schemaTypes names %s, which api/openapi.yaml no longer has", name)
		}
	}
}

// properties merges a schema's properties with those of its allOf parts.
func properties(s *openapi3.Schema) map[string]*openapi3.SchemaRef {
	out := map[string]*openapi3.SchemaRef{}
	for _, part := range s.AllOf {
		for k, v := range properties(part.Value) {
			out[k] = v
		}
	}
	for k, v := range s.Properties {
		out[k] = v
	}
	return out
}

var rawJSON = reflect.TypeOf(json.RawMessage{})

func compareSchema(t *testing.T, at string, ref *openapi3.SchemaRef, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	s := ref.Value
	// next_action: NextAction or null.
	for _, alt := range append(s.AnyOf, s.OneOf...) {
		if alt.Value != nil && !alt.Value.Type.Is("null") {
			compareSchema(t, at, alt, typ)
			return
		}
	}
	if typ == rawJSON || typ.Kind() == reflect.Interface {
		return // any JSON
	}
	props := properties(s)
	switch {
	case len(props) > 0:
		if typ.Kind() != reflect.Struct {
			t.Errorf("%s: an object in the contract, %s in the client", at, typ)
			return
		}
		fields := jsonFields(typ)
		for name, p := range props {
			f, ok := fields[name]
			if !ok {
				t.Errorf("%s.%s: in the contract, missing from %s", at, name, typ)
				continue
			}
			compareSchema(t, at+"."+name, p, f)
		}
		for name := range fields {
			if _, ok := props[name]; !ok {
				t.Errorf("%s.%s: in %s, missing from the contract", at, name, typ)
			}
		}
	case s.Items != nil:
		if typ.Kind() != reflect.Slice && typ.Kind() != reflect.Array {
			t.Errorf("%s: an array in the contract, %s in the client", at, typ)
			return
		}
		compareSchema(t, at+"[]", s.Items, typ.Elem())
	case s.AdditionalProperties.Schema != nil && typ.Kind() == reflect.Map:
		compareSchema(t, at+"{}", s.AdditionalProperties.Schema, typ.Elem())
	case s.Type.Is("object") && typ.Kind() != reflect.Map && typ.Kind() != reflect.Struct:
		t.Errorf("%s: an object in the contract, %s in the client", at, typ)
	}
}

// jsonFields are a struct's fields by JSON name.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// enumConstants reads the string constants of the package's source, by
// type name.
func enumConstants(t *testing.T) map[string][]string {
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range pkgs {
		for name, f := range p.Files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					id, ok := vs.Type.(*ast.Ident)
					if !ok {
						continue
					}
					for _, v := range vs.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							s, _ := strconv.Unquote(lit.Value)
							out[id.Name] = append(out[id.Name], s)
						}
					}
				}
			}
		}
	}
	return out
}
