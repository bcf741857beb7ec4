package checkout

import (
	"fmt"
	"net/http"

	"github.com/xaalis/xaalis/internal/locale"
)

// lang is a language of the page: "fr" or "en".
type lang string

const (
	langFR lang = "fr"
	langEN lang = "en"
)

// parseLang accepts "fr" and "en" (any case, with a region: "fr-SN").
func parseLang(s string) (lang, bool) {
	l, ok := locale.Parse(s)
	return lang(l), ok
}

// pickLang chooses the page's language: ?lang=fr|en, else the request's
// Accept-Language (French unless English is strictly preferred), else
// French.
func pickLang(r *http.Request) lang {
	if l, ok := parseLang(r.URL.Query().Get("lang")); ok {
		return l
	}
	return acceptLang(r.Header.Get("Accept-Language"))
}

// acceptLang reads an Accept-Language header (locale.Accept): French
// unless English is strictly preferred.
func acceptLang(header string) lang { return lang(locale.Accept(header)) }

// other is the language the switch link offers.
func (l lang) other() lang { return lang(locale.Lang(l).Other()) }

// Name is the language's name in itself, for the switch link.
func (l lang) Name() string { return locale.Lang(l).Name() }

// T translates a message key. A missing key shows as "!missing(key)", which
// the tests look for.
func (l lang) T(key string) string {
	if s, ok := messages[l][key]; ok {
		return s
	}
	return "!missing(" + key + ")"
}

// F translates a message key and formats it with args.
func (l lang) F(key string, args ...any) string { return fmt.Sprintf(l.T(key), args...) }

// countryName names a UEMOA country in the language, with its article in
// French ("du Sénégal").
func (l lang) countryName(code string) string {
	if names, ok := countryNames[code]; ok {
		if l == langEN {
			return names[1]
		}
		return names[0]
	}
	return code
}

// countryNames: French (with "de" folded in) and English.
var countryNames = map[string][2]string{
	"SN": {"du Sénégal", "Senegal"},
	"CI": {"de Côte d'Ivoire", "Côte d'Ivoire"},
	"ML": {"du Mali", "Mali"},
	"BF": {"du Burkina Faso", "Burkina Faso"},
	"TG": {"du Togo", "Togo"},
	"BJ": {"du Bénin", "Benin"},
	"NE": {"du Niger", "Niger"},
	"GW": {"de Guinée-Bissau", "Guinea-Bissau"},
}

// messages holds every string of the page. Both languages have the same
// keys (a test checks it). Values are plain text: the templates escape
// them.
var messages = map[lang]map[string]string{
	langFR: {
		"title":                       "Paiement",
		"pay_to":                      "Paiement à",
		"reference":                   "Référence",
		"merchant_ref":                "Commande",
		"secured_by":                  "Paiement sécurisé par Xaalis",
		"switch_lang":                 "Switch to English",
		"test_mode":                   "Mode test",
		"test_mode_detail":            "Aucun argent réel ne circule.",
		"not_found_title":             "Paiement introuvable",
		"not_found_body":              "Ce lien de paiement n'existe pas. Vérifiez l'adresse ou demandez un nouveau lien au marchand.",
		"error_title":                 "Service indisponible",
		"forbidden_title":             "Requête refusée",
		"forbidden_body":              "Cette action doit venir de la page de paiement elle-même.",
		"choose_title":                "Choisissez votre moyen de paiement",
		"choose_provider":             "Moyen de paiement",
		"phone_label":                 "Votre numéro mobile money",
		"phone_help":                  "Le numéro du compte qui paie, par exemple +221\u00a077\u00a0123\u00a045\u00a067.",
		"pay_button":                  "Payer %s",
		"no_provider":                 "Aucun moyen de paiement ne peut prendre ce paiement pour le moment. Réessayez plus tard ou contactez le marchand.",
		"hint_redirect":               "Validez dans l'application",
		"hint_otp":                    "Composez un code, saisissez le code reçu",
		"hint_ussd":                   "Confirmez sur votre téléphone",
		"otp_title":                   "Confirmez avec un code",
		"otp_step_dial":               "Composez ce code sur votre téléphone pour recevoir un code à usage unique :",
		"otp_step_enter":              "Saisissez ce code ci-dessous pour confirmer le paiement.",
		"otp_label":                   "Code reçu",
		"otp_submit":                  "Confirmer le paiement",
		"otp_test_hint":               "Mode test : le code est %s.",
		"ussd_title":                  "Confirmez sur votre téléphone",
		"ussd_body":                   "Une demande de paiement a été envoyée sur votre téléphone. Validez-la avec votre code secret.",
		"ussd_missing":                "Rien reçu ? Composez ce code pour retrouver la demande :",
		"redirect_title":              "Validez dans %s",
		"redirect_body":               "Ouvrez votre portefeuille pour approuver le paiement, puis revenez sur cette page.",
		"redirect_button":             "Ouvrir %s",
		"waiting_title":               "Paiement en cours",
		"waiting_body":                "Nous attendons la confirmation de l'opérateur.",
		"waiting":                     "En attente de confirmation…",
		"refresh":                     "Actualiser",
		"via":                         "Via %s",
		"cancel_payment":              "Annuler le paiement",
		"simulate_title":              "Simuler le résultat",
		"simulate_help":               "Choisissez d'abord un moyen de paiement pour simuler une réussite ou un échec.",
		"simulate_success":            "Succès",
		"simulate_failed":             "Échec",
		"simulate_cancelled":          "Annulé",
		"return":                      "Retour chez le marchand",
		"countdown":                   "Retour automatique chez le marchand dans {s}\u00a0s.",
		"popup_close":                 "Vous pouvez fermer cette fenêtre.",
		"outcome_success":             "Paiement réussi",
		"outcome_failed":              "Paiement échoué",
		"outcome_cancelled":           "Paiement annulé",
		"outcome_expired":             "Lien de paiement expiré",
		"outcome_refunded":            "Paiement remboursé",
		"outcome_disputed":            "Paiement contesté",
		"detail_success":              "Votre paiement de %s à %s a bien été effectué.",
		"detail_failed":               "Aucun argent n'a été débité.",
		"detail_cancelled":            "Le paiement a été annulé. Aucun argent n'a été débité.",
		"detail_expired":              "Le délai pour payer est écoulé. Aucun argent n'a été débité.",
		"detail_refunded":             "Ce paiement vous a été remboursé.",
		"detail_disputed":             "Ce paiement fait l'objet d'une contestation.",
		"reason_insufficient_funds":   "Solde insuffisant.",
		"reason_payer_declined":       "Le paiement a été refusé sur le téléphone.",
		"reason_payer_cancelled":      "Le paiement a été annulé.",
		"reason_too_many_wrong_codes": "Trop de codes erronés.",
		// Errors carried by ?e=.
		"e_generic":                   "Un problème est survenu de notre côté. Réessayez dans un instant.",
		"e_refused":                   "Ce paiement ne peut pas être traité. Contactez le marchand.",
		"e_gateway_unavailable":       "L'opérateur est momentanément injoignable. Réessayez dans un instant ou choisissez un autre moyen de paiement.",
		"e_gateway_error":             "L'opérateur a refusé le paiement. Vérifiez votre numéro et votre solde, ou choisissez un autre moyen de paiement.",
		"e_provider_required":         "Choisissez un moyen de paiement.",
		"e_provider_unavailable":      "Ce moyen de paiement ne peut pas prendre ce paiement. Choisissez-en un autre.",
		"e_provider_minimum":          "Le montant est inférieur au minimum de ce moyen de paiement. Choisissez-en un autre.",
		"e_payer_limit":               "Ce paiement dépasserait le plafond de votre compte mobile money sur 30 jours (règles BCEAO).",
		"e_too_many":                  "Trop de paiements ont été lancés pour ce numéro. Réessayez plus tard.",
		"e_merchant_inactive":         "Le marchand ne peut pas recevoir de paiements pour le moment.",
		"e_not_waiting":               "Ce paiement a avancé entre-temps : voici son état actuel.",
		"e_otp_required":              "Saisissez le code reçu.",
		"e_otp_wrong":                 "Ce code n'est pas le bon. Vérifiez-le et réessayez.",
		"e_outcome_invalid":           "Résultat de simulation inconnu.",
		"e_test_only":                 "La simulation n'existe que pour les paiements de test.",
		"e_simulate_needs_provider":   "Choisissez d'abord un moyen de paiement pour simuler une réussite ou un échec.",
		"e_phone_required":            "Saisissez votre numéro mobile money.",
		"e_phone_empty":               "Saisissez votre numéro mobile money.",
		"e_phone_not_a_number":        "Le numéro ne peut contenir que des chiffres, des espaces et un + au début.",
		"e_phone_too_short":           "Le numéro est trop court pour un numéro %s (+%d).",
		"e_phone_too_long":            "Le numéro est trop long pour un numéro %s (+%d).",
		"e_phone_wrong_country":       "Ce numéro est d'un autre pays : saisissez un numéro %s (+%d).",
		"e_phone_old_numbering_plan":  "Ce numéro suit l'ancien plan à 8 chiffres : les numéros %s ont désormais 10 chiffres (+%d).",
		"e_phone_not_mobile":          "Ce numéro n'est pas un numéro mobile : le mobile money demande un numéro mobile.",
		"e_phone_invalid":             "Ce numéro n'est pas un numéro valide %s (+%d).",
		"e_phone_unsupported_country": "Le pays de ce paiement n'est pas servi.",
	},
	langEN: {
		"title":                       "Payment",
		"pay_to":                      "Payment to",
		"reference":                   "Reference",
		"merchant_ref":                "Order",
		"secured_by":                  "Payment secured by Xaalis",
		"switch_lang":                 "Passer en français",
		"test_mode":                   "Test mode",
		"test_mode_detail":            "No real money moves.",
		"not_found_title":             "Payment not found",
		"not_found_body":              "This payment link does not exist. Check the address or ask the merchant for a new link.",
		"error_title":                 "Service unavailable",
		"forbidden_title":             "Request refused",
		"forbidden_body":              "This action must come from the payment page itself.",
		"choose_title":                "Choose how to pay",
		"choose_provider":             "Payment method",
		"phone_label":                 "Your mobile money number",
		"phone_help":                  "The number of the paying account, for example +221\u00a077\u00a0123\u00a045\u00a067.",
		"pay_button":                  "Pay %s",
		"no_provider":                 "No payment method can take this payment right now. Try again later or contact the merchant.",
		"hint_redirect":               "Approve in the app",
		"hint_otp":                    "Dial a code, enter the code you receive",
		"hint_ussd":                   "Confirm on your phone",
		"otp_title":                   "Confirm with a code",
		"otp_step_dial":               "Dial this code on your phone to receive a one-time code:",
		"otp_step_enter":              "Enter that code below to confirm the payment.",
		"otp_label":                   "Code received",
		"otp_submit":                  "Confirm payment",
		"otp_test_hint":               "Test mode: the code is %s.",
		"ussd_title":                  "Confirm on your phone",
		"ussd_body":                   "A payment request was sent to your phone. Approve it with your PIN.",
		"ussd_missing":                "Nothing arrived? Dial this code to find the request:",
		"redirect_title":              "Approve in %s",
		"redirect_body":               "Open your wallet to approve the payment, then come back to this page.",
		"redirect_button":             "Open %s",
		"waiting_title":               "Payment in progress",
		"waiting_body":                "We are waiting for the provider's confirmation.",
		"waiting":                     "Waiting for confirmation…",
		"refresh":                     "Refresh",
		"via":                         "Via %s",
		"cancel_payment":              "Cancel payment",
		"simulate_title":              "Simulate the outcome",
		"simulate_help":               "Choose a payment method first to simulate a success or a failure.",
		"simulate_success":            "Success",
		"simulate_failed":             "Failed",
		"simulate_cancelled":          "Cancelled",
		"return":                      "Return to the merchant",
		"countdown":                   "Returning to the merchant in {s}\u00a0s.",
		"popup_close":                 "You can close this window.",
		"outcome_success":             "Payment successful",
		"outcome_failed":              "Payment failed",
		"outcome_cancelled":           "Payment cancelled",
		"outcome_expired":             "Payment link expired",
		"outcome_refunded":            "Payment refunded",
		"outcome_disputed":            "Payment disputed",
		"detail_success":              "Your payment of %s to %s went through.",
		"detail_failed":               "No money was taken.",
		"detail_cancelled":            "The payment was cancelled. No money was taken.",
		"detail_expired":              "The time to pay ran out. No money was taken.",
		"detail_refunded":             "This payment was refunded to you.",
		"detail_disputed":             "This payment is disputed.",
		"reason_insufficient_funds":   "Insufficient balance.",
		"reason_payer_declined":       "The payment was declined on the phone.",
		"reason_payer_cancelled":      "The payment was cancelled.",
		"reason_too_many_wrong_codes": "Too many wrong codes.",
		"e_generic":                   "Something went wrong on our side. Please try again in a moment.",
		"e_refused":                   "This payment cannot be processed. Contact the merchant.",
		"e_gateway_unavailable":       "The provider cannot be reached right now. Try again in a moment or choose another payment method.",
		"e_gateway_error":             "The provider refused the payment. Check your number and balance, or choose another payment method.",
		"e_provider_required":         "Choose a payment method.",
		"e_provider_unavailable":      "This payment method cannot take this payment. Choose another one.",
		"e_provider_minimum":          "The amount is below this payment method's minimum. Choose another one.",
		"e_payer_limit":               "This payment would exceed the 30-day ceiling of your mobile money account (BCEAO rules).",
		"e_too_many":                  "Too many payments were started for this number. Try again later.",
		"e_merchant_inactive":         "The merchant cannot accept payments right now.",
		"e_not_waiting":               "This payment has moved on in the meantime: here is where it stands.",
		"e_otp_required":              "Enter the code you received.",
		"e_otp_wrong":                 "This code is not right. Check it and try again.",
		"e_outcome_invalid":           "Unknown simulated outcome.",
		"e_test_only":                 "Simulation exists for test payments only.",
		"e_simulate_needs_provider":   "Choose a payment method first to simulate a success or a failure.",
		"e_phone_required":            "Enter your mobile money number.",
		"e_phone_empty":               "Enter your mobile money number.",
		"e_phone_not_a_number":        "The number may contain only digits, spaces and a leading +.",
		"e_phone_too_short":           "The number is too short for a %s number (+%d).",
		"e_phone_too_long":            "The number is too long for a %s number (+%d).",
		"e_phone_wrong_country":       "This number belongs to another country: enter a %s number (+%d).",
		"e_phone_old_numbering_plan":  "This number follows the old 8-digit plan: %s numbers now have 10 digits (+%d).",
		"e_phone_not_mobile":          "This is not a mobile number: mobile money needs a mobile number.",
		"e_phone_invalid":             "This is not a valid %s number (+%d).",
		"e_phone_unsupported_country": "The country of this payment is not served.",
	},
}
