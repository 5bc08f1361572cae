// Package deploy holds no code: it is where the deployment files live (the container
// image's Dockerfile at the repository root, kubernetes/, systemd/,
// config.example.yaml) and its tests check them against the daemon: the Dockerfile's
// build command is run and its binary started, every manifest is parsed, and the
// configuration each one sets up goes through the real loader.
package deploy
