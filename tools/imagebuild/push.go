package main

import (
	"context"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push writes idx to PREFIX/NAME:VERSION, with credentials from the Docker
// config (~/.docker/config.json and its credential helpers), and returns the
// reference pushed, by digest. The SBOM travels inside every image
// (/usr/share/doc/threatview/NAME.spdx.json) and next to the archive.
func Push(ctx context.Context, prefix, image, version string, idx v1.ImageIndex, _ []byte) (string, error) {
	tag, err := PushRef(prefix, image, version)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", err
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return tag.Context().Digest(d.String()).String(), nil
}

// PushRef is PREFIX/NAME:VERSION, validated.
func PushRef(prefix, image, version string) (name.Tag, error) {
	return name.NewTag(strings.TrimSuffix(prefix, "/")+"/"+image+":"+version, name.StrictValidation)
}
