// sha256 of each uWebSockets.js binary we agree to load (uwebsockets@3.0.6, uWS source commit b8704be92ff2b16c6dd44cc2b334158ab73eef2a).
// A binary whose hash is not here, or differs, is never loaded: the node:http engine runs instead.
export const uwsPackageVersion = '3.0.6';
export const uwsBinarySha256: Readonly<Record<string, string>> = {
  'uws_linux_x64_115.node': 'f4fa5d7b697529b45ac8aa3d57385d9af51bc1d2b26aa9f5b68ca4361542e665',
  'uws_linux_x64_127.node': '78e38a9a163b1cf33ce539619e5908111dea95a12e7943d95fbcdd524879caa8',
  'uws_linux_x64_137.node': '3b549c14e01d9d1faf234cdf4b6f0fb08158605e3692cd0eb1b905e327bd3449',
  'uws_linux_x64_141.node': 'd22bae7642b872152cd0eeb682c6c2ffd186e91af8cf18cdf98be984a6549d49',
  'uws_linux_arm64_115.node': '034e0fcccdc08f90df3b130f421516311831b1352fe38eab91abc2984c2fdf3a',
  'uws_linux_arm64_127.node': 'a7d9bc3ec166421a49416d5ea4f49118ae68ea1dbf8a765c4f45a79b0b6adb13',
  'uws_linux_arm64_137.node': 'b6eb007d627e00bcce03ad38f197124e9027c03f6fe784b37f97b8a6ea709cb4',
  'uws_linux_arm64_141.node': '1317f2e69ea1924ee8dd94ed02a3e6beb08e55d8b06f18caeda3d67a02857aee',
  'uws_darwin_arm64_115.node': 'f6132ac4d0954ce32ed716d5b367270904c5885bc6e01dcc8ae5809a8967d504',
  'uws_darwin_arm64_127.node': '84ab0c487fbbb895afbfa24c7ac02db5922b2eb468b3a4663aaca52af29b420c',
  'uws_darwin_arm64_137.node': 'dd7623e7e600dcc1384c4a639ac05849f0c27125be8c431b702e0513e86613f0',
  'uws_darwin_arm64_141.node': 'a1c354c77958054d144a1cb1ab2b5f445e4c1454c98762eb52eef7a6cd95c0c5',
};
