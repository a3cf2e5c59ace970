// A second, stricter identity provider for the resource-server tests: panva's oidc-provider (a certified
// OpenID provider) issuing RFC 9068 JWT access tokens to a client_credentials client, with resource indicators
// (RFC 8707): the token's `aud` is the resource the client asked for, and a token is only issued for a
// resource this provider knows. Usage: node oidc_issuer.mjs PORT RESOURCE. Prints "listening on ISSUER".
import Provider, { errors } from 'oidc-provider';

const [port, resource] = [Number(process.argv[2]), process.argv[3]];
const issuer = `http://127.0.0.1:${port}`;
const scopes = ['tools:echo', 'tools:add'];

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'carol-app',
      client_secret: 'oidc-provider-test-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: 'tools:echo',
    },
  ],
  scopes,
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined, // no resource, no token for us: the client must name it
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) {
          throw new errors.InvalidTarget();
        }
        return { scope: scopes.join(' '), audience: indicator, accessTokenFormat: 'jwt', accessTokenTTL: 300 };
      },
    },
  },
});
provider.listen(port, '127.0.0.1', () => console.log(`listening on ${issuer}`));
