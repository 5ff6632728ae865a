#!/usr/bin/env bash
# A local StoreKit signing chain (root, WWDR-like intermediate, signing leaf with Apple's OIDs) for
# the journey test: the stack trusts this root for the demo app in Apple's "Xcode" environment only.
set -e
D=$1
mkdir -p "$D"; cd "$D"
openssl ecparam -name prime256v1 -genkey -noout -out root.key
openssl req -x509 -new -key root.key -sha256 -days 3650 -subj "/CN=Local StoreKit Root CA" -out root.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out inter.key
openssl req -new -key inter.key -subj "/CN=Local StoreKit WWDR" -out inter.csr
printf 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n1.2.840.113635.100.6.2.1=DER:0500\n' > inter.ext
openssl x509 -req -in inter.csr -CA root.pem -CAkey root.key -CAcreateserial -days 3650 -sha256 -extfile inter.ext -out inter.pem 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out leaf.key
openssl pkcs8 -topk8 -nocrypt -in leaf.key -out leaf.p8
openssl req -new -key leaf.key -subj "/CN=Local StoreKit Signing" -out leaf.csr
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n1.2.840.113635.100.6.11.1=DER:0500\n' > leaf.ext
openssl x509 -req -in leaf.csr -CA inter.pem -CAkey inter.key -CAcreateserial -days 3650 -sha256 -extfile leaf.ext -out leaf.pem 2>/dev/null
for c in root inter leaf; do openssl x509 -in $c.pem -outform DER | base64 -w0 > $c.der.b64; done
