# Read by every non-interactive bash of an agent's session (BASH_ENV, set by `handoffd up`),
# after a login profile that may have reset PATH: handoffd's shims and commands go back in
# front, once; then the BASH_ENV the user had, if any (docs/protocol.md §16).
case ":${PATH-}:" in
  *":${HANDOFFD_PATH-}:"*) ;;
  *) [ -n "${HANDOFFD_PATH-}" ] && PATH="$HANDOFFD_PATH${PATH:+:$PATH}" && export PATH ;;
esac
if [ -n "${HANDOFFD_BASH_ENV-}" ] && [ -r "$HANDOFFD_BASH_ENV" ]; then
  . "$HANDOFFD_BASH_ENV"
fi
